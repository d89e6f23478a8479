"""Per-group (Mondrian) fallbacks: a group without a threshold of its own keeps the pool, or says it is not guaranteed.

Seeded simulation: 400 easy questions (gold almost always first) and a hard group of 6
(gold anywhere in the top 3), at a 0.90 target. The hard group is too small for a finite
rank, so its own threshold is ``+inf``; the pooled threshold keeps the top chunk and
covers the hard group about a third of the time.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.core.errors import GuaranteeCutWarning, SmallGroupWarning
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.selection import decide_set
from conformal_rag_plugins.langchain.document_selection import select_documents
from conformal_rag_plugins.llamaindex.node_selection import select_nodes
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.serving import ServingOptions
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
POOL = 20
N_EASY, N_HARD = 400, 6


def _question(rng: np.random.Generator, hard: bool) -> PoolObservation:
    scores = np.sort(rng.uniform(0.2, 0.9, POOL))[::-1]
    gold = int(rng.integers(0, 3)) if hard else int(rng.random() < 0.03)
    return PoolObservation(scores, (gold,))


def _calibrate(fallback: str | None = None) -> RetrievalCalibration:
    rng = np.random.default_rng(2026)
    obs = [_question(rng, False) for _ in range(N_EASY)] + [_question(rng, True) for _ in range(N_HARD)]
    groups = ["easy"] * N_EASY + ["hard"] * N_HARD
    kw = {} if fallback is None else {"group_fallback": fallback}
    with pytest.warns(SmallGroupWarning, match="'hard' has 6"):
        return (
            RetrievalConformalizer(0.9, score="rank")
            .conformalize_pools(obs, fingerprint=FP, pool_size=POOL, groups=groups, **kw)
            .calibration_
        )


def _coverage(cal: RetrievalCalibration, group: str, n: int = 3000) -> float:
    rng = np.random.default_rng(7)
    threshold, _ = cal.threshold_for(group)
    hits = 0
    for _ in range(n):
        q = _question(rng, True)
        hits += q.gold_positions[0] in decide_set("rank", q.scores, threshold).indices
    return hits / n


@pytest.mark.parametrize("group", ["hard", "a-group-never-seen"])
def test_default_fallback_covers_a_small_or_unknown_hard_group(group) -> None:
    cal = _calibrate()
    assert _coverage(cal, group) >= 0.9  # at the 0.90 target, within the hard group
    assert cal.group_fallback_ == "keep_all" and math.isfinite(cal.threshold_)
    assert cal.threshold_for(group) == (
        math.inf,
        "keep-all-small-group" if group == "hard" else "keep-all-unknown-group",
    )


@pytest.mark.parametrize("group", ["hard", "a-group-never-seen"])
def test_pooled_fallback_by_name_under_covers_and_says_so(group) -> None:
    cal = _calibrate("pooled")
    source = "pooled-small-group" if group == "hard" else "pooled-unknown-group"
    assert cal.threshold_for(group) == (cal.threshold_, source)
    assert _coverage(cal, group) < 0.5  # the pooled threshold holds over all questions, not within the group
    nodes = _nodes()
    with pytest.warns(GuaranteeCutWarning, match="pooled threshold was used"):
        got = select_nodes(nodes, cal, query="q", options=ServingOptions(group=group))
    assert got and all(n.node.metadata["conformal_guaranteed"] is False for n in got)
    assert all(n.node.metadata["conformal_threshold_source"] == source for n in got)


def _nodes() -> list[NodeWithScore]:
    scores = np.linspace(0.9, 0.2, 8)
    return [NodeWithScore(node=TextNode(id_=f"n{i}", text=f"t{i}"), score=float(s)) for i, s in enumerate(scores)]


def _documents() -> tuple[list[Document], list[float]]:
    scores = [float(s) for s in np.linspace(0.9, 0.2, 8)]
    return [Document(page_content=f"t{i}") for i in range(8)], scores


def _flags(framework: str, cal: RetrievalCalibration, group: str | None) -> tuple[set, set, set, bool]:
    """``(guaranteed, source, threshold)`` values over the returned items, and whether a cut warning was raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if framework == "llamaindex":
            metas = [
                n.node.metadata for n in select_nodes(_nodes(), cal, query="q", options=ServingOptions(group=group))
            ]
        else:
            docs, scores = _documents()
            metas = [
                d.metadata for d in select_documents(docs, scores, cal, query="q", options=ServingOptions(group=group))
            ]
    warned = any(issubclass(w.category, GuaranteeCutWarning) for w in caught)
    return (
        {m["conformal_guaranteed"] for m in metas},
        {m["conformal_threshold_source"] for m in metas},
        {m["conformal_threshold"] for m in metas},
        warned,
    )


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_both_adapters_flag_what_the_threshold_guarantees(framework) -> None:
    keep_all, pooled = _calibrate(), _calibrate("pooled")
    own = keep_all.groups_["easy"]["threshold"]
    # the group's own threshold: guaranteed within the group
    assert _flags(framework, keep_all, "easy") == ({True}, {"group"}, {own}, False)
    # no group: the pooled threshold and its ordinary (marginal) guarantee
    assert _flags(framework, pooled, None) == ({True}, {"pooled-no-group"}, {pooled.threshold_}, False)
    # keep-all (+inf): every candidate; like any +inf threshold, the pool itself is not guaranteed to hold the gold
    for group, source in (("hard", "keep-all-small-group"), ("new", "keep-all-unknown-group")):
        assert _flags(framework, keep_all, group) == ({False}, {source}, {math.inf}, True)
    # the pooled fallback: not the query's own group's threshold, so never guaranteed
    for group, source in (("hard", "pooled-small-group"), ("new", "pooled-unknown-group")):
        assert _flags(framework, pooled, group) == ({False}, {source}, {pooled.threshold_}, True)


def test_files_saved_before_the_fallback_field_load_as_pooled_and_say_so(tmp_path) -> None:
    data = _calibrate("pooled").to_dict()
    assert data["group_fallback"] == "pooled"
    old = with_checksum({k: v for k, v in data.items() if k not in ("checksum", "group_fallback")})
    cal = RetrievalCalibration.from_dict(old)  # the small group's stored pooled threshold still checks out
    assert cal.group_fallback_ == "pooled" and cal.threshold_for("hard") == (cal.threshold_, "pooled-small-group")
    assert _flags("llamaindex", cal, "hard")[0] == {False}
    back = RetrievalCalibration.load(_calibrate().save(tmp_path / "keep_all.json"))
    assert back.group_fallback_ == "keep_all" and back.threshold_for("hard")[0] == math.inf
