"""The end-to-end rule of a grouped query (issue 41, item 1): each group's own retrieval threshold at alpha_ret.

Unit tests of :mod:`conformal_rag_plugins.answer_sets.group_rules` and of ``abuild_answer_set`` with a fake
sampler; both frameworks' synthesizers are in ``test_group_rules_adapters.py`` and the simulation given the
flag per group in ``tests/evaluation/test_group_answer_set_trials.py``. Thresholds come from the library.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.engine import ChunkInput, abuild_answer_set, chunks_from_metadata
from conformal_rag_plugins.answer_sets.group_rules import chunk_rules, decide_chunks, group_rule
from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.clustering import cluster_answers
from conformal_rag_plugins.core.combination import HarmonicMeanRule
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.core.quantile import conformal_quantile, pac_quantile
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.groups import with_chunk_groups, with_groups
from conformal_rag_plugins.runtime.run_sync import run_sync

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
ALPHA, ALPHA_RET = 0.2, 0.1


def _scores() -> tuple[tuple[float, ...], tuple[str, ...]]:
    rng = np.random.default_rng(3)
    easy, hard = rng.random(80), rng.random(80) + 0.5
    return tuple(float(x) for x in np.concatenate([easy, hard, [0.2, 0.3]])), ("easy",) * 80 + ("hard",) * 80 + (
        "tiny",
    ) * 2


def _calibration(split: SplitOptions | None = None, *, chunk: bool = False, fallback: str = "keep_all"):
    scores, labels = _scores()
    plain = RetrievalCalibration(
        conformal_quantile(scores, 0.1), 0.1, "split", "relative", 20, len(scores), 0, scores, FP
    )
    group = with_chunk_groups if chunk else with_groups
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grouped = group(plain, labels, "tenant", fallback=fallback)
    gen = tuple(float(x) for x in -np.random.default_rng(4).uniform(0.3, 1.0, len(scores)))
    return AnswerSetCalibration.from_stages(
        grouped,
        gen,
        alpha=ALPHA,
        split=split or SplitOptions(alpha_retrieval=ALPHA_RET),
        n_samples=3,
        model="fake",
        clustering={"method": "exact"},
    )


def _group_scores(group: str) -> list[float]:
    scores, labels = _scores()
    return [s for s, g in zip(scores, labels, strict=True) if g == group]


def test_bonferroni_serves_the_groups_threshold_at_alpha_retrieval() -> None:
    cal = _calibration()
    for g in ("easy", "hard"):
        rule, q, reason = group_rule(cal, g)
        assert q == conformal_quantile(_group_scores(g), ALPHA_RET) == rule.q_ret
        assert rule.q_gen == cal.rule().q_gen and rule.guaranteed and reason == ""
    assert group_rule(cal, "easy")[1] < cal.rule().q_ret < group_rule(cal, "hard")[1]
    assert group_rule(cal, None) == (cal.rule(), cal.retrieval_threshold_, "")


def test_pac_serves_the_groups_pac_threshold() -> None:
    cal = _calibration(SplitOptions(method="pac", alpha_retrieval=ALPHA_RET, delta=0.1))
    rule, q, reason = group_rule(cal, "hard")
    assert q == rule.q_ret == pac_quantile(_group_scores("hard"), ALPHA_RET, 0.05)
    assert reason == ""


def test_hmp_computes_retrieval_pvalues_among_the_groups_scores() -> None:
    cal = _calibration(SplitOptions(method="hmp", hmp_weight=0.5))
    rule, _, reason = group_rule(cal, "hard")
    assert isinstance(rule, HarmonicMeanRule)
    assert rule.ret_calibration.tolist() == sorted(_group_scores("hard"))
    # a chunk at the pooled median is ordinary for the hard group but extreme for the easy group
    x = float(np.median(_scores()[0]))
    assert rule.retrieval_pvalues([x])[0] > group_rule(cal, "easy")[0].retrieval_pvalues([x])[0]
    assert reason == ""


@pytest.mark.parametrize("fallback", ["keep_all", "pooled"])
def test_a_small_or_unseen_group_is_not_guaranteed(fallback: str) -> None:
    cal = _calibration(fallback=fallback)
    for group, why in (("tiny", "too few calibration questions"), ("new", "not seen at calibration")):
        _, q, reason = group_rule(cal, group)
        assert f"Group {group!r} has no retrieval threshold of its own" in reason and why in reason
        assert q == (cal.retrieval_stage().threshold_ if fallback == "pooled" else math.inf)


def test_chunks_of_one_query_must_share_a_group() -> None:
    cal = _calibration()
    with pytest.raises(ConformalError, match="different groups"):
        chunk_rules(cal, ["easy", "hard"])
    with pytest.raises(ConformalError, match="different groups"):
        chunk_rules(cal, ["easy", None])
    assert chunk_rules(cal, [None, None]).thresholds == (cal.retrieval_threshold_,) * 2


def test_label_conditional_rules_are_per_chunk_and_need_every_group() -> None:
    cal = _calibration(chunk=True)
    rules = chunk_rules(cal, ["hard", "easy", None])
    assert rules.thresholds[:2] == (group_rule(cal, "hard")[1], group_rule(cal, "easy")[1])
    assert math.isinf(rules.thresholds[2])  # a chunk without a group: the unseen-group fallback
    assert "Label-conditional" in rules.reason and "'tiny'" in rules.reason


def test_decide_chunks_merges_in_chunk_order() -> None:
    cal = _calibration(chunk=True)
    rules = chunk_rules(cal, ["hard", "easy", "hard"])
    q_hard, q_easy = rules.thresholds[0], rules.thresholds[1]
    nonconf = [q_easy - 0.01, q_easy - 0.02, q_hard - 0.01]
    clusters = {c: cluster_answers(["a", "a", "a"], method="exact") for c in ("c0", "c1", "c2")}
    decision = decide_chunks(rules, ["c0", "c1", "c2"], nonconf, clusters, cal.rule())
    assert decision.retrieval_set == ("c0", "c1", "c2")
    assert [p.chunk_id for p in decision.pairs] == ["c0", "c1", "c2"]


def test_the_engine_keeps_a_chunk_beyond_the_pooled_threshold_for_a_hard_query() -> None:
    cal = _calibration()
    q_hard, pooled = group_rule(cal, "hard")[1], cal.rule().q_ret
    between = (pooled + q_hard) / 2
    meta = {"conformal_nonconformity": between, "conformal_threshold": q_hard, "conformal_group": "hard"}
    meta |= {"conformal_threshold_source": "group", "conformal_score_family": "relative"}
    chunks, cut = chunks_from_metadata([("c", "text", meta)], cal)
    assert chunks == [ChunkInput("c", "text", between, True, "hard")] and cut == ""

    async def sample(question: str, context: str) -> list[Sample]:
        return [Sample("Rollo")] * 3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no generator record: unchecked
        result = run_sync(abuild_answer_set(cal, "Who?", chunks, sample))
    assert result.retrieval_set == ["c"] and result.response == "Rollo"  # the pooled rule dropped it


def test_a_retriever_below_the_groups_threshold_loses_the_flag() -> None:
    cal = _calibration()
    q_hard, pooled = group_rule(cal, "hard")[1], cal.rule().q_ret
    meta = {"conformal_nonconformity": 0.1, "conformal_threshold": (pooled + q_hard) / 2, "conformal_group": "hard"}
    chunks, reason = chunks_from_metadata([("c", "text", meta)], cal)
    assert not chunks[0].guaranteed and "group 'hard''s threshold" in reason  # above pooled: passed before
