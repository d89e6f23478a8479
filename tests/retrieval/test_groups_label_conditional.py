"""Label-conditional (per chunk group) thresholds: each chunk is kept against the threshold of its own group.

The group is a property of the chunk (``metadata["collection"]``), so no group is needed at
query time. Calibration: the threshold of group ``g`` is the ``ceil((n_g + 1)(1 - alpha))``-th
smallest nonconformity of the gold chunks of ``g`` (``+inf`` past ``n_g``). Checked here on
small exact cases (rank, ``+inf``, unknown group, fallbacks, JSON), on both frameworks'
selection with hand-built nodes/documents, and on a seeded simulation of two collections of
different difficulty where the pooled rule (NEGATIVE CONTROL) under-covers the hard one.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.core.errors import (
    CalibrationIntegrityError,
    ConformalError,
    GuaranteeCutWarning,
    SmallGroupWarning,
)
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.selection import decide_chunk_set
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.evaluation.mondrian_trials import simulate_group_splits
from conformal_rag_plugins.langchain import ConformalDocumentCompressor
from conformal_rag_plugins.langchain.document_selection import select_documents
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor
from conformal_rag_plugins.llamaindex.node_selection import select_nodes
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.groups import (
    check_group_options,
    chunk_group_labels,
    chunk_set,
    chunk_thresholds,
    with_chunk_groups,
)
from conformal_rag_plugins.storage.jsonio import with_checksum

# The label-conditional machinery under the plain rank, whose numbers are easy to follow; the pool-miss
# rule per group is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
ALPHA = 0.1


def _base(scores: list[float], pool: int = 4) -> RetrievalCalibration:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = conformal_quantile(scores, ALPHA)
    return RetrievalCalibration(q, ALPHA, "split", "relative", pool, len(scores), 0, tuple(scores), FP)


def _two_collections() -> RetrievalCalibration:
    """19 'wiki' gold chunks with nonconformity 0.00..0.18 and 19 'faq' ones with 0.0..0.9 (rank 18 of 19)."""
    wiki = [i / 100 for i in range(19)]
    faq = [i / 20 for i in range(19)]
    return with_chunk_groups(_base(wiki + faq), ["wiki"] * 19 + ["faq"] * 19, "collection")


# ---- the thresholds -------------------------------------------------------------------------------------


def test_each_chunk_group_gets_its_own_finite_sample_rank() -> None:
    cal = _two_collections()
    # n_g = 19: rank ceil(20 * 0.9) = 18, the 18th smallest of each group's scores
    assert cal.groups_["wiki"] == {"n": 19, "threshold": 0.17, "source": "group"}
    assert cal.groups_["faq"] == {"n": 19, "threshold": 17 / 20, "source": "group"}
    assert cal.chunk_group_key_ == "collection" and cal.group_by_ == "collection"
    # the pooled threshold of all 38 (rank ceil(39 * 0.9) = 36) is not what either group gets
    assert cal.threshold_ not in (0.17, 0.85)


def test_a_group_past_its_rank_keeps_everything_with_a_warning() -> None:
    scores = [i / 100 for i in range(19)] + [0.3] * 8  # 8 'faq' questions: rank ceil(9 * 0.9) = 9 > 8
    with pytest.warns(SmallGroupWarning, match="'faq' has 8"):
        cal = with_chunk_groups(_base(scores), ["wiki"] * 19 + ["faq"] * 8, "collection")
    assert cal.groups_["faq"]["threshold"] == math.inf
    assert cal.groups_["faq"]["source"] == "keep-all-small-group"


def test_an_unknown_or_missing_chunk_group_keeps_the_chunk() -> None:
    cal = _two_collections()
    thresholds, sources = chunk_thresholds(cal, ["wiki", "blog", None, ""])
    assert thresholds == [0.17, math.inf, math.inf, math.inf]
    assert sources == ["group"] + ["keep-all-unknown-group"] * 3


def test_the_set_keeps_each_candidate_against_its_own_group() -> None:
    cal = _two_collections()
    scores = np.array([1.0, 0.9, 0.8, 0.1])  # relative nonconformity 0, 0.1, 0.2, 0.9
    decision, thresholds, meta = chunk_set(cal, scores, ["wiki", "wiki", "faq", "faq"])
    # wiki: 0 and 0.1 <= 0.17 kept; faq: 0.2 <= 0.85 kept, 0.9 > 0.85 dropped
    assert decision.indices == (0, 1, 2) and decision.guaranteed
    assert thresholds == [0.17, 0.17, 0.85, 0.85]
    decision, _, _ = chunk_set(cal, scores, ["faq", "wiki", "wiki", "faq"])
    assert decision.indices == (0, 1)  # the wiki chunk at 0.2 fails 0.17; the faq chunk at 0.9 fails 0.85
    decision, _, _ = chunk_set(cal, np.array([1.0, 0.8, 0.7]), ["wiki", "wiki", "faq"])
    assert decision.indices == (0, 2)  # not a prefix: 0.3 passes faq, 0.2 fails wiki
    assert [m["conformal_group"] for m in meta] == ["wiki", "wiki", "faq", "faq"]


def test_guaranteed_flags_are_honest() -> None:
    cal = _two_collections()
    scores = np.array([1.0, 0.9, 0.8])
    unknown, _, meta = chunk_set(cal, scores, ["wiki", "blog", "faq"])
    assert not unknown.guaranteed and "'blog'" in unknown.reason and 1 in unknown.indices
    assert meta[1]["conformal_threshold_source"] == "keep-all-unknown-group"
    cut, _, _ = chunk_set(cal, scores, ["wiki", "wiki", "faq"], max_k=1)
    assert not cut.guaranteed and "max_k=1" in cut.reason
    pooled = with_chunk_groups(_base(list(cal.scores_)), list(cal.group_labels_), "collection", fallback="pooled")
    d, thr, meta = chunk_set(pooled, scores, ["wiki", "blog", "faq"])
    assert thr[1] == pooled.threshold_ and meta[1]["conformal_threshold_source"] == "pooled-unknown-group"
    assert not d.guaranteed
    with pytest.warns(SmallGroupWarning):
        small = with_chunk_groups(_base([0.1] * 19 + [0.2] * 3), ["wiki"] * 19 + ["faq"] * 3, "collection")
    whole, _, _ = chunk_set(small, scores, ["wiki", "wiki", "wiki"])  # faq's gold needs every faq chunk
    assert not whole.guaranteed and "'faq'" in whole.reason


def test_decide_chunk_set_pads_cuts_and_refuses_bad_thresholds() -> None:
    s = [0.9, 0.8, 0.7, 0.6]
    assert decide_chunk_set("rank", s, [1, 1, 3, 1]).indices == (0, 2)  # ranks 1..4 vs own thresholds
    assert decide_chunk_set("rank", s, [1, 1, 3, 1], min_k=3).indices == (0, 1, 2)  # pads with the best unkept
    assert decide_chunk_set("similarity", s, [-0.85, math.inf, -0.75, -0.5]).indices == (0, 1, 3)  # not a prefix
    with pytest.raises(ConformalError, match="3 thresholds for 4 candidates"):
        decide_chunk_set("rank", s, [1, 1, 1])
    with pytest.raises(ConformalError, match="NaN"):
        decide_chunk_set("rank", s, [1, 1, math.nan, 1])


# ---- labels, options, JSON ------------------------------------------------------------------------------


def test_chunk_group_labels_come_from_the_question_or_its_gold_chunk() -> None:
    ex = [
        CalibrationExample("a?", gold_ids=("c1",)),
        CalibrationExample("b?", gold_ids=("c2",), metadata={"collection": "faq"}),
    ]
    assert chunk_group_labels(ex, "collection", {"c1": "wiki", "c2": "faq"}) == ("wiki", "faq")
    with pytest.raises(ConformalError, match="says its gold chunk is in collection='faq'"):
        chunk_group_labels(ex, "collection", {"c1": "wiki", "c2": "wiki"})
    with pytest.raises(ConformalError, match="Cannot tell the 'collection' of the gold chunk of 'a\\?'"):
        chunk_group_labels(ex, "collection", {"c2": "faq"})


def test_query_group_options_are_refused_for_a_chunk_group_calibration() -> None:
    with pytest.raises(ConformalError, match="per-chunk-group thresholds"):
        check_group_options(_two_collections(), "wiki", None)


def test_the_key_survives_json_and_is_checked_on_load(tmp_path) -> None:
    cal = _two_collections()
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "cal.json"))
    assert loaded.chunk_group_key_ == "collection" and loaded.groups_ == cal.groups_
    data = json.loads((tmp_path / "cal.json").read_text())
    assert data["chunk_group_key"] == "collection"
    # an older grouped file (no chunk_group_key, no grouping record) still loads, as a per-query-group calibration
    old = with_checksum({k: v for k, v in data.items() if k not in ("checksum", "chunk_group_key", "grouping")})
    assert RetrievalCalibration.from_dict(old).chunk_group_key_ is None
    bad = with_checksum({k: v for k, v in data.items() if k != "checksum"} | {"chunk_group_key": "tenant"})
    with pytest.raises(CalibrationIntegrityError, match="chunk_group_key 'tenant' differs from group_by"):
        RetrievalCalibration.from_dict(bad)
    plain = _base(list(cal.scores_)).to_dict()
    lone = with_checksum({k: v for k, v in plain.items() if k != "checksum"} | {"chunk_group_key": "collection"})
    with pytest.raises(CalibrationIntegrityError, match="chunk_group_key without groups"):
        RetrievalCalibration.from_dict(lone)


# ---- both frameworks' selection on hand-built candidates -------------------------------------------------

SCORES = [1.0, 0.9, 0.8, 0.1]
GROUPS = ["wiki", "wiki", "faq", "faq"]


def _nodes(groups: list[str]) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=f"t{i}", metadata={"collection": g}), score=s)
        for i, (g, s) in enumerate(zip(groups, SCORES, strict=True))
    ]


def _docs(groups: list[str]) -> list[Document]:
    return [
        Document(id=f"n{i}", page_content=f"t{i}", metadata={"collection": g, "score": s})
        for i, (g, s) in enumerate(zip(groups, SCORES, strict=True))
    ]


def _metas(framework: str, groups: list[str], cal: RetrievalCalibration, via: str) -> list[dict]:
    if framework == "llamaindex":
        if via == "select":
            got = select_nodes(_nodes(groups), cal)
        else:
            got = ConformalNodePostprocessor(calibration=cal).postprocess_nodes(_nodes(groups), query_str="q")
        return [n.node.metadata for n in got]
    if via == "select":
        got = select_documents(_docs(groups), SCORES, cal)
    else:
        got = ConformalDocumentCompressor(calibration=cal).compress_documents(_docs(groups), "q")
    return [d.metadata for d in got]


@pytest.mark.parametrize("via", ["select", "postprocessor/compressor"])
@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_both_frameworks_keep_each_chunk_against_its_own_group(framework: str, via: str) -> None:
    cal = _two_collections()
    metas = _metas(framework, GROUPS, cal, via)
    assert [m["collection"] for m in metas] == ["wiki", "wiki", "faq"]
    assert [m["conformal_threshold"] for m in metas] == [0.17, 0.17, 0.85]
    assert [m["conformal_threshold_source"] for m in metas] == ["group"] * 3
    assert [m["conformal_group"] for m in metas] == ["wiki", "wiki", "faq"]
    assert all(m["conformal_guaranteed"] is True for m in metas)
    with pytest.warns(GuaranteeCutWarning, match="'blog' were not seen at calibration"):
        metas = _metas(framework, ["wiki", "wiki", "faq", "blog"], cal, via)
    assert metas[-1]["conformal_threshold"] == math.inf and metas[-1]["collection"] == "blog"  # kept, +inf
    assert not any(m["conformal_guaranteed"] for m in metas)


def test_llamaindex_hides_the_group_keys_from_the_llm() -> None:
    node = select_nodes(_nodes(GROUPS), _two_collections())[0].node
    assert {"conformal_group", "conformal_threshold_source", "conformal_threshold"} <= set(
        node.excluded_llm_metadata_keys
    )


# ---- coverage within each collection: a seeded simulation ------------------------------------------------

POOL = 20


def _pool(rng: np.random.Generator) -> tuple[PoolObservation, list[str], str]:
    """A query over two collections: the gold is in 'hard' for 30% of questions, where it ranks lower."""
    labels = list(rng.choice(["easy", "hard"], POOL))
    scores = np.sort(rng.uniform(0.2, 0.9, POOL))[::-1]
    gold_group = "hard" if rng.random() < 0.3 else "easy"
    where = [i for i, g in enumerate(labels) if g == gold_group] or [POOL - 1]
    pos = where[min(int(rng.geometric(0.25 if gold_group == "hard" else 0.9)) - 1, len(where) - 1)]
    labels[pos] = gold_group
    return PoolObservation(scores, (pos,)), labels, gold_group


def test_simulated_coverage_holds_in_each_collection_and_pooled_fails_the_hard_one() -> None:
    rng = np.random.default_rng(20261125)
    drawn = [_pool(rng) for _ in range(600)]
    obs, cand, gold = zip(*drawn, strict=True)
    res = simulate_group_splits(
        list(obs), list(gold), ALPHA, family="rank", splits=RandomSplits(trials=200, seed=3), candidate_groups=cand
    )
    per_group = dict(zip(res.groups, np.nanmean(res.coverage_group, axis=0), strict=True))
    pooled = dict(zip(res.groups, np.nanmean(res.coverage_pooled, axis=0), strict=True))
    tol = 3 * math.sqrt(ALPHA * (1 - ALPHA) * (2 / (res.n.min() / 2)) / 200)
    assert all(c >= 1 - ALPHA - tol for c in per_group.values()), per_group
    assert pooled["hard"] < 1 - ALPHA - tol, pooled  # NEGATIVE CONTROL: the pooled rule
    # a per-candidate count: the easy collection's chunks are cut by its own small threshold
    assert np.nanmean(res.size_group) < POOL


def test_the_monitor_refuses_set_size_for_a_chunk_group_calibration() -> None:
    """Set sizes of a label-conditional set depend on the chunks' groups, which the monitor does not see."""
    from conformal_rag_plugins.monitor.monitor import ConformalMonitor

    cal = _two_collections()
    with pytest.raises(ConformalError, match="per-chunk-group"):
        ConformalMonitor(cal, reference=[1.0] * 20, statistic="set_size")
    assert ConformalMonitor(cal, reference=[0.5] * 20, statistic="top1").statistic == "top1"
