"""Issue 41 item 5: which scores ``conformal-rag monitor`` watches (no model; the shifted stream is in
``test_monitor_cmd_shift.py``): a hybrid host through the dense similarities behind its fusion, others as served."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conformal_rag_plugins.commands.monitor_scores import MONITOR_SCORES, dense_feed, score_source
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
CAL = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, tuple(i / 10 for i in range(1, 10)), FP)


def test_auto_watches_the_dense_similarities_of_a_hybrid_host_only() -> None:
    assert [score_source(g, "hybrid") for g in (None, "auto", "served", "dense")] == [
        "dense",
        "dense",
        "served",
        "dense",
    ]
    assert [score_source(g, "dense") for g in (None, "auto", "served")] == ["served"] * 3
    assert score_source(None, "bm25") == "served"
    with pytest.raises(ConformalError, match="has none"):
        score_source("dense", "bm25")
    with pytest.raises(ConformalError, match="must be one of"):
        score_source("fused", "hybrid")
    assert set(MONITOR_SCORES) == {"auto", "served", "dense"}


def test_a_resumed_state_fixes_the_source() -> None:
    assert score_source(None, "hybrid", resumed="served") == "served"  # a state saved before: its served scores
    assert score_source("auto", "hybrid", resumed="dense") == "dense"
    with pytest.raises(ConformalError, match="disagrees with the resumed state"):
        score_source("dense", "hybrid", resumed="served")


def test_the_dense_feed_observes_the_best_dense_score_first() -> None:
    mon = ConformalMonitor(CAL, reference=[0.5, 0.6, 0.7], score_source="dense")
    pools = {"q": SimpleNamespace(scores=np.array([0.2, 0.9, 0.4]))}  # a pool in any order
    dense_feed(mon, pools.__getitem__)("q")
    assert mon.stream == [0.9]
