"""The query-time decision written once (``retrieval/serving.py``): both frameworks' drop-ins serve the same set.

Synthetic calibrations and pools (no model, no store).
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/retrieval/dropin_init.py

from __future__ import annotations

import warnings

import numpy as np
import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins import Fingerprint, RetrievalCalibration, ServingOptions
from conformal_rag_plugins.core.errors import (
    ConformalError,
    CorpusChangedWarning,
    GuaranteeCutWarning,
    SmallGroupWarning,
)
from conformal_rag_plugins.langchain import ConformalDocumentCompressor
from conformal_rag_plugins.langchain.document_selection import select_documents
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor
from conformal_rag_plugins.llamaindex.node_selection import select_nodes
from conformal_rag_plugins.retrieval.fingerprint import corpus_digest
from conformal_rag_plugins.retrieval.groups import with_groups
from conformal_rag_plugins.retrieval.served_checks import check_host
from conformal_rag_plugins.retrieval.serving import CONFORMAL_METADATA_KEYS, serve_set

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
SCORES = [0.95, 0.9, 0.8, 0.6, 0.3]


def _cal(threshold: float = 0.1) -> RetrievalCalibration:
    return RetrievalCalibration(threshold, 0.1, "split", "relative", 5, 9, 0, (threshold,) * 9, FP)


def _grouped() -> RetrievalCalibration:
    scores = (*(i / 20 for i in range(20)), 0.5, 0.6)
    labels = ("a",) * 20 + ("b",) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGroupWarning)  # group "b" is too small on purpose
        return with_groups(RetrievalCalibration(0.9, 0.1, "split", "relative", 5, 22, 0, scores, FP), labels, "tenant")


def _nodes() -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=f"c{i}", text=f"t{i}"), score=s) for i, s in enumerate(SCORES)]


def _docs() -> list[Document]:
    return [Document(id=f"c{i}", page_content=f"t{i}") for i in range(len(SCORES))]


class _Monitor:
    def __init__(self) -> None:
        self.seen: list[tuple[list[float], int, object]] = []

    def check_calibration(self, calibration: object) -> None:
        pass

    def observe(self, scores, *, set_size, calibration, group):
        self.seen.append((list(scores), set_size, group))


@pytest.mark.parametrize(
    "options",
    [ServingOptions(), ServingOptions(min_k=4), ServingOptions(max_k=1), ServingOptions(min_k=1, max_k=2)],
)
def test_both_frameworks_serve_the_same_set_with_the_same_metadata(options):
    cal = _cal()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuaranteeCutWarning)
        nodes = select_nodes(_nodes(), cal, options)
        docs = select_documents(_docs(), SCORES, cal, options)
    assert [n.node.node_id for n in nodes] == [d.id for d in docs]
    for n, d in zip(nodes, docs, strict=True):
        li = dict(n.node.metadata)
        lc = dict(d.metadata)
        assert li.pop("conformal_score") == lc.pop("score") == n.score
        assert li == lc
        assert set(CONFORMAL_METADATA_KEYS) <= set(n.node.metadata)
        assert set(CONFORMAL_METADATA_KEYS) <= set(n.node.excluded_llm_metadata_keys)


def test_serve_set_keeps_the_relative_set_and_pads_and_cuts():
    cal = _cal()
    assert [i for i, _, _ in serve_set(cal, SCORES, [{}] * 5).kept] == [0, 1]
    assert [i for i, _, _ in serve_set(cal, SCORES, [{}] * 5, ServingOptions(min_k=3)).kept] == [0, 1, 2]
    with pytest.warns(GuaranteeCutWarning, match="max_k=1"):
        cut = serve_set(cal, SCORES, [{}] * 5, ServingOptions(max_k=1))
    assert [i for i, _, _ in cut.kept] == [0] and not cut.decision.guaranteed
    assert all(meta["conformal_guaranteed"] is False for _, _, meta in cut.kept)


def test_the_guarantee_cut_warning_names_the_callers_line():
    with pytest.warns(GuaranteeCutWarning) as caught:
        serve_set(_cal(), SCORES, [{}] * 5, ServingOptions(max_k=1), stacklevel=1)
    assert caught[0].filename == __file__


def test_the_monitor_sees_the_scores_the_set_size_and_the_served_group():
    cal, monitor = _grouped(), _Monitor()
    select_nodes(_nodes(), cal, ServingOptions(group="a", monitor=monitor), query="q")
    select_documents(_docs(), SCORES, cal, ServingOptions(group="a", monitor=monitor), query="q")
    assert len(monitor.seen) == 2 and monitor.seen[0] == monitor.seen[1]
    scores, size, group = monitor.seen[0]
    assert scores == SCORES and group == "a" and size >= 1


def test_group_by_picks_the_group_of_the_query_and_the_metadata_says_so():
    options = ServingOptions(group_by=lambda q: q.split(":")[0])
    # calibrated by the metadata key "tenant": the function cannot be rerun on its questions (issue 33)
    with pytest.warns(GuaranteeCutWarning, match="not checked against the calibration"):
        kept = serve_set(_grouped(), SCORES, [{}] * 5, options, query="a: who?").kept
    assert {meta["conformal_guaranteed"] for _, _, meta in kept} == {False}
    assert {meta["conformal_group"] for _, _, meta in kept} == {"a"}
    assert {meta["conformal_threshold_source"] for _, _, meta in kept} == {"group"}


def test_options_refuse_crossed_bounds_and_a_group_without_groups():
    with pytest.raises(ConformalError, match=r"max_k \(2\) must be >= min_k \(5\)"):
        ServingOptions(min_k=5, max_k=2)
    with pytest.raises(ConformalError, match="min_k must be >= 0"):
        ServingOptions(min_k=-1)
    with pytest.raises(ConformalError, match="per-group calibration"):
        ConformalNodePostprocessor(calibration=_cal(), options=ServingOptions(group="acme"))
    with pytest.raises(ConformalError, match="per-group calibration"):
        ConformalDocumentCompressor(calibration=_cal(), options=ServingOptions(group="acme"))


@pytest.mark.parametrize("drop_in", [ConformalNodePostprocessor, ConformalDocumentCompressor])
def test_a_loose_knob_is_refused_not_ignored(drop_in):
    with pytest.raises(ConformalError, match=r"options=ServingOptions\(max_k=\.\.\.\)"):
        drop_in(calibration=_cal(), max_k=3)
    assert drop_in(calibration=_cal(), options=ServingOptions(max_k=3)).options.max_k == 3


@pytest.mark.parametrize("drop_in", [ConformalNodePostprocessor, ConformalDocumentCompressor])
def test_a_monitor_attached_later_is_checked_and_used(drop_in):
    built = drop_in(calibration=_cal(), options=ServingOptions(max_k=4))
    monitor = _Monitor()
    built.monitor = monitor
    assert built.monitor is monitor and built.options.max_k == 4

    class Other(_Monitor):
        def check_calibration(self, calibration):
            raise ConformalError("another calibration")

    with pytest.raises(ConformalError, match="another calibration"):
        built.monitor = Other()
    assert built.monitor is monitor


def test_check_host_warns_once_on_a_changed_collection():
    cal = RetrievalCalibration(
        0.1, 0.1, "split", "relative", 5, 9, 0, (0.1,) * 9, FP, corpus_=corpus_digest(["a", "b", "c"])
    )
    assert check_host(cal, FP, lambda: ["a", "b", "c"], "retriever").corpus_warned is False
    with pytest.warns(CorpusChangedWarning) as caught:
        served = check_host(cal, FP, lambda: ["a", "b", "z"], "retriever", stacklevel=1)
    assert served.corpus_warned and caught[0].filename == __file__


def test_serve_set_on_an_infinite_threshold_keeps_the_pool_and_says_it_is_not_guaranteed():
    with pytest.warns(GuaranteeCutWarning, match=r"\+inf"):
        served = serve_set(_cal(np.inf), SCORES, [{}] * 5)
    assert len(served.kept) == len(SCORES) and not served.decision.guaranteed
