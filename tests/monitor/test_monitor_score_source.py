"""Issue 41 item 5: a monitor records whose scores it watches, and a retriever feeds only a served-score monitor.

A fusion host normalises each query's scores, so its served top-1 cannot show a shift; its monitor watches the
raw dense similarities (``score_source="dense"``), which the caller feeds. The shifted stream itself is measured
in ``tests/commands/test_monitor_cmd_shift.py`` (MiniLM and Chroma).
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/monitor/schema.py

from __future__ import annotations

import pytest

from conformal_rag_plugins.core.errors import CalibrationIntegrityError, ConformalError
from conformal_rag_plugins.monitor.monitor import SCORE_SOURCES, ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.serving import ServingOptions, serve_set
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
CAL = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, tuple(i / 10 for i in range(1, 10)), FP)


def test_the_score_source_is_saved_and_loaded(tmp_path) -> None:
    mon = ConformalMonitor(CAL, reference=[0.5, 0.6, 0.7], score_source="dense")
    mon.observe([0.8, 0.1])
    data = mon.to_dict()
    assert data["score_source"] == "dense" and data["schema_version"] == 3
    again = ConformalMonitor.load(mon.save(tmp_path / "m.json"), CAL)
    assert again.score_source == "dense" and again.to_dict() == data
    assert ConformalMonitor(CAL, reference=[0.5]).to_dict()["score_source"] == "served"  # the default
    assert SCORE_SOURCES == ("served", "dense")


def test_a_schema_2_state_has_no_score_source_and_watched_the_served_scores() -> None:
    data = ConformalMonitor(CAL, reference=[0.5, 0.6]).to_dict()
    old = {k: v for k, v in data.items() if k not in ("score_source", "checksum")}
    old["schema_version"] = 2
    old["runs"] = [{k: v for k, v in run.items() if k != "reference"} for run in old["runs"]]
    assert ConformalMonitor.from_dict(with_checksum(old), CAL).score_source == "served"
    with pytest.raises(CalibrationIntegrityError, match="schema 3"):
        ConformalMonitor.from_dict(with_checksum({**old, "score_source": "dense"}), CAL)
    with pytest.raises(CalibrationIntegrityError, match="invalid fields"):
        ConformalMonitor.from_dict(
            with_checksum({**{k: v for k, v in data.items() if k != "checksum"}, "score_source": "fused"}), CAL
        )


def test_bad_sources_are_refused() -> None:
    with pytest.raises(ConformalError, match="score_source must be one of"):
        ConformalMonitor(CAL, reference=[0.5], score_source="fused")
    with pytest.raises(ConformalError, match="set_size"):
        ConformalMonitor(CAL, reference=[1, 2], statistic="set_size", score_source="dense")


def test_a_retriever_does_not_feed_a_dense_monitor_its_served_scores() -> None:
    dense = ConformalMonitor(CAL, reference=[0.5, 0.6], score_source="dense")
    with pytest.raises(ConformalError, match="do not attach it to the retriever"):
        ServingOptions(monitor=dense).check(CAL)
    with pytest.raises(ConformalError, match="do not attach it to the retriever"):
        serve_set(CAL, [0.9, 0.5], [{}, {}], ServingOptions(monitor=dense), query="q")
    assert dense.n_stream == 0
    served = ConformalMonitor(CAL, reference=[0.5, 0.6])
    ServingOptions(monitor=served).check(CAL)  # the served-score monitor is fed as before
    serve_set(CAL, [0.9, 0.5], [{}, {}], ServingOptions(monitor=served), query="q")
    assert served.stream == [0.9]
