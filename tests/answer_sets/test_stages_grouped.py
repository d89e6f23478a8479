"""An answer-set calibration's grouped retrieval stage serves per-group thresholds at the stage's level.

Issue 33, item 2: ``AnswerSetCalibration.retrieval_stage()`` replaced the pooled threshold and alpha
with ``alpha_retrieval`` but kept the per-group thresholds fitted at the retrieval calibration's own
alpha. Seeded example: 400 questions, rank family, two groups, alpha = 0.1, alpha_retrieval = 0.05.
The groups fitted at 0.1 are {a: 18, b: 19}, at 0.05 {a: 19, b: 20}; the old stage kept 18 chunks of
group ``a`` and labelled them ``conformal_alpha=0.05``, guaranteed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.core.quantile import conformal_quantile, pac_quantile
from conformal_rag_plugins.langchain import ConformalDocumentCompressor
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.groups import check_groups, with_chunk_groups, with_groups
from conformal_rag_plugins.retrieval.serving import ServingOptions, serve_set, serving_calibration

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
POOL = 30
ALPHA, ALPHA_RET = 0.1, 0.05


def _ranks(seed: int = 24) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """400 gold ranks: group ``a`` uniform on 1..20, group ``b`` on 1..21 (seed 24 gives the issue's numbers)."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(1, 21, 200), rng.integers(1, 22, 200)
    return tuple(float(r) for r in np.concatenate([a, b])), ("a",) * 200 + ("b",) * 200


def _retrieval(alpha: float = ALPHA, *, chunk: bool = False) -> RetrievalCalibration:
    scores, labels = _ranks()
    cal = RetrievalCalibration(
        conformal_quantile(scores, alpha), alpha, "split", "rank", POOL, len(scores), 0, scores, FP
    )
    if chunk:
        return with_chunk_groups(cal, labels, "collection")
    return with_groups(cal, labels, "tenant")


def _answer_sets(retrieval: RetrievalCalibration, split: SplitOptions) -> AnswerSetCalibration:
    gen = tuple(float(x) for x in -np.random.default_rng(1).uniform(0.2, 1.0, len(retrieval.scores_)))
    return AnswerSetCalibration.from_stages(
        retrieval, gen, alpha=ALPHA, split=split, n_samples=5, model="fake", clustering={"method": "exact"}
    )


def _thresholds(cal: RetrievalCalibration) -> dict[str, float]:
    return {g: float(v["threshold"]) for g, v in cal.groups_.items()}


def test_the_seeded_example_has_the_issues_numbers() -> None:
    assert _thresholds(_retrieval(ALPHA)) == {"a": 18.0, "b": 19.0}
    assert _thresholds(_retrieval(ALPHA_RET)) == {"a": 19.0, "b": 20.0}


@pytest.mark.parametrize("chunk", [False, True], ids=["group_by", "chunk_group_key"])
def test_a_grouped_stage_serves_group_thresholds_at_alpha_retrieval(chunk: bool) -> None:
    cal = _answer_sets(_retrieval(ALPHA, chunk=chunk), SplitOptions(alpha_retrieval=ALPHA_RET))
    stage = serving_calibration(cal)
    assert stage.alpha_ == ALPHA_RET
    assert _thresholds(stage) == {"a": 19.0, "b": 20.0}  # was {a: 18, b: 19}, fitted at alpha = 0.1
    assert stage.groups_ == _retrieval(ALPHA_RET, chunk=chunk).groups_
    assert stage.chunk_group_key_ == ("collection" if chunk else None)
    check_groups(stage)  # the stage is self-consistent: its groups are what its scores give at its level
    # the calibration itself (and its file) keeps the retrieval calibration as it was fitted
    assert _thresholds(cal.retrieval_) == {"a": 18.0, "b": 19.0}


def test_pac_and_hmp_stages_refit_their_groups_at_their_own_level() -> None:
    pac = _answer_sets(_retrieval(), SplitOptions(method="pac", alpha_retrieval=ALPHA_RET, delta=0.1))
    stage = pac.retrieval_stage()
    scores, labels = _ranks()
    for g in ("a", "b"):
        mine = [s for s, lab in zip(scores, labels, strict=True) if lab == g]
        assert stage.groups_[g]["threshold"] == pac_quantile(mine, ALPHA_RET, 0.05)
    hmp = _answer_sets(_retrieval(), SplitOptions(method="hmp", hmp_weight=0.5))
    stage = hmp.retrieval_stage()
    assert stage.alpha_ == pytest.approx(ALPHA * 0.5 / 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert stage.groups_ == _retrieval(stage.alpha_).groups_


@pytest.mark.parametrize(("method", "misses"), [("bonferroni", 9), ("pac", 5)])
def test_the_groups_refit_under_the_stages_own_miss_bound(method: str, misses: int) -> None:
    """Issue 41: the per-group refit used the retrieval calibration's bound (the default alpha/2), not the stage's."""
    scores, labels = _ranks()
    scores = tuple(np.inf if i % 200 < misses else s for i, s in enumerate(scores))  # misses per group
    base = RetrievalCalibration(
        conformal_quantile(scores, ALPHA), ALPHA, "split", "rank", POOL, len(scores), 2 * misses, scores, FP
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retrieval = with_groups(base, labels, "tenant")
        delta = {"delta": 0.1} if method == "pac" else {}
        default = _answer_sets(retrieval, SplitOptions(method=method, alpha_retrieval=ALPHA_RET, **delta))
        zero = _answer_sets(
            retrieval, SplitOptions(method=method, alpha_retrieval=ALPHA_RET, retrieval_miss_bound=0.0, **delta)
        )
        stage = zero.retrieval_stage()
        for g in ("a", "b"):
            mine = [s for s, lab in zip(scores, labels, strict=True) if lab == g]
            expected = (
                pac_quantile(mine, ALPHA_RET, 0.05, miss_bound=0.0)
                if method == "pac"
                else conformal_quantile(mine, ALPHA_RET, miss_bound=0.0)
            )
            assert stage.groups_[g]["threshold"] == expected, g
        # the bound changes the groups' thresholds (split: finite with a bound of 0, +inf by the default's miss
        # cap; PAC: +inf with a bound of 0, whose rank needs more hits, finite by the default's epsilon')
        finite = [np.isfinite(list(_thresholds(c).values())).tolist() for c in (stage, default.retrieval_stage())]
        assert finite == ([[True, True], [False, False]] if method == "bonferroni" else [[False, False], [True, True]])
    assert stage.miss_bound_ == 0.0 and default.retrieval_stage().miss_bound_ is None


def _served_sizes(cal: AnswerSetCalibration, chunk: bool) -> tuple[int, int, dict]:
    """Set sizes through both frameworks' drop-ins and the framework-free serve_set, for a group-``a`` query."""
    scores = [1.0 - i / POOL for i in range(POOL)]
    meta = {"collection": "a"} if chunk else {}
    options = ServingOptions() if chunk else ServingOptions(group="a")
    nodes = [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=f"t{i}", metadata=dict(meta)), score=s)
        for i, s in enumerate(scores)
    ]
    docs = [Document(id=f"n{i}", page_content=f"t{i}", metadata={**meta, "score": s}) for i, s in enumerate(scores)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept_nodes = ConformalNodePostprocessor(calibration=cal, options=options).postprocess_nodes(
            nodes, query_str="q"
        )
        kept_docs = ConformalDocumentCompressor(calibration=cal, options=options).compress_documents(docs, "q")
        served = serve_set(serving_calibration(cal), scores, [meta] * POOL, options)
    assert len(served.kept) == len(kept_nodes) == len(kept_docs)
    return len(kept_nodes), len(kept_docs), kept_nodes[0].node.metadata


@pytest.mark.parametrize("chunk", [False, True], ids=["group_by", "chunk_group_key"])
def test_both_frameworks_keep_the_alpha_retrieval_set_of_the_group(chunk: bool) -> None:
    cal = _answer_sets(_retrieval(ALPHA, chunk=chunk), SplitOptions(alpha_retrieval=ALPHA_RET))
    n_nodes, n_docs, meta = _served_sizes(cal, chunk)
    assert (n_nodes, n_docs) == (19, 19)  # was 18: group a's threshold at alpha = 0.1
    assert meta["conformal_alpha"] == ALPHA_RET
    assert meta["conformal_group"] == "a" and meta["conformal_threshold_source"] == "group"
    assert meta["conformal_guaranteed"] is True


def test_an_ungrouped_stage_is_unchanged() -> None:
    scores, _ = _ranks()
    plain = RetrievalCalibration(conformal_quantile(scores, ALPHA), ALPHA, "split", "rank", POOL, 400, 0, scores, FP)
    stage = _answer_sets(plain, SplitOptions(alpha_retrieval=ALPHA_RET)).retrieval_stage()
    assert stage.groups_ == {} and stage.threshold_ == conformal_quantile(scores, ALPHA_RET)
