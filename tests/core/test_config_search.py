"""Choosing the unit and the pool by context tokens: the arithmetic behind ``evaluate``'s tuned default."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.config_search import (
    choose_configuration,
    evaluate_fixed_settings,
    evaluate_tuned_splits,
)
from conformal_rag_plugins.core.errors import ConformalError, PoolMissWarning
from conformal_rag_plugins.core.parent_scores import aggregate_to_parents
from conformal_rag_plugins.core.pool_matrix import PoolMatrix
from conformal_rag_plugins.core.pool_misses import pool_miss_advice
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.retrieval_scores import SCORE_FAMILIES
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.parent_pools import to_parent_pool
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool


def _random_obs(rng, n=60, width=12, miss=0.1, cost=(20, 200)):
    out = []
    for _ in range(n):
        k = int(rng.integers(1, width + 1))
        scores = np.round(np.sort(rng.random(k))[::-1], 2)  # rounding makes ties
        gold = () if rng.random() < miss else (int(rng.integers(k)),)
        out.append(PoolObservation(scores, gold, costs=rng.integers(*cost, size=k).astype(float)))
    return out


def test_pool_matrix_keeps_exactly_what_keep_mask_keeps() -> None:
    rng = np.random.default_rng(0)
    obs = _random_obs(rng)
    matrix = PoolMatrix.from_observations(obs)
    for family in SCORE_FAMILIES:
        for q in [*np.unique([o.score(family) for o in obs if math.isfinite(o.score(family))]), math.inf, -5.0]:
            covered, sizes, tokens = matrix.evaluate(family, float(q))
            for i, o in enumerate(obs):
                c, s = o.covered_and_size(family, float(q))
                assert (bool(covered[i]), int(sizes[i])) == (c, s), (family, q, i)
                assert tokens[i] == o.context_tokens(family, float(q))


def test_tokens_objective_prefers_small_units_even_with_more_of_them() -> None:
    # chunks: gold at rank 3 of 3, 10 tokens each (30 tokens); documents: gold first, 400 tokens each
    chunks = [PoolObservation(np.array([0.9, 0.8, 0.7]), (2,), costs=np.full(3, 10.0))] * 20
    docs = [PoolObservation(np.array([0.9, 0.5, 0.4]), (0,), costs=np.full(3, 400.0))] * 20
    by_size = choose_configuration({"chunk": chunks, "document": docs}, 0.1, families=("rank",))
    by_tokens = choose_configuration({"chunk": chunks, "document": docs}, 0.1, families=("rank",), objective="tokens")
    assert by_size.config == "document" and by_tokens.config == "chunk"
    assert by_tokens.mean_tokens == {"chunk|rank": 30.0, "document|rank": 400.0}


def test_larger_pools_compete_only_when_the_base_pool_misses_more_than_half_alpha() -> None:
    rng = np.random.default_rng(1)
    hit = PoolObservation(np.array([0.9, 0.8]), (0,), costs=np.ones(2))
    miss = PoolObservation(np.array([0.9, 0.8]), (), costs=np.ones(2))
    big = PoolObservation(np.array([0.9, 0.8, 0.7, 0.6]), (0,), costs=np.ones(4))
    for n_miss, eligible in ((2, False), (5, True)):  # alpha/2 = 5% of 40 questions = 2 misses
        base = [miss] * n_miss + [hit] * (40 - n_miss)
        rng.shuffle(base)
        choice = choose_configuration(
            {"p50": base, "p100": [big] * 40}, 0.1, families=("relative",), objective="tokens", base_of={"p100": "p50"}
        )
        assert ("p100" in choice.skipped) is not eligible
        if eligible:  # with misses above alpha/2 the base pool's threshold is +inf: all candidates are kept
            assert choice.config == "p100"


def test_unknown_objective_and_missing_costs_are_clear_errors() -> None:
    obs = [PoolObservation(np.array([0.9, 0.1]), (0,))] * 10
    with pytest.raises(ConformalError, match="objective"):
        choose_configuration({"a": obs}, 0.1, objective="latency")
    with pytest.raises(ConformalError, match="costs"):
        choose_configuration({"a": obs}, 0.1, objective="tokens")
    with pytest.raises(ConformalError, match="base_of"):
        choose_configuration({"a": obs}, 0.1, base_of={"b": "a"})
    with pytest.raises(ConformalError, match="one per candidate"):
        PoolObservation(np.array([0.9, 0.1]), (0,), costs=np.array([1.0]))


def test_tuned_and_fixed_rows_report_context_tokens() -> None:
    rng = np.random.default_rng(2)
    settings = {"chunk": _random_obs(rng, 120, cost=(10, 30)), "document": _random_obs(rng, 120, cost=(300, 500))}
    summary, choices = evaluate_tuned_splits(settings, 0.2, splits=RandomSplits(trials=10), objective="tokens")
    row = summary.as_row()
    assert row["mean_context_tokens"] is not None and row["mean_context_tokens"] > 0
    fixed = evaluate_fixed_settings(settings, 0.2, splits=RandomSplits(trials=10))
    assert set(fixed) == {f"{k}|{f}" for k in settings for f in SCORE_FAMILIES}
    best = min(fixed.values(), key=lambda s: s.as_row()["mean_context_tokens"])
    assert best.method.startswith("chunk")
    assert sum(choices.values()) == 10
    # without costs the field is still there, as null
    plain = {"a": [PoolObservation(o.scores, o.gold_positions) for o in settings["chunk"]]}
    assert evaluate_tuned_splits(plain, 0.2, splits=RandomSplits(trials=3))[0].as_row()["mean_context_tokens"] is None


def test_parents_are_scored_from_their_chunks_and_bad_input_is_refused() -> None:
    pool = aggregate_to_parents(
        ["a1", "b1", "a2", "c1"], [0.9, 0.85, 0.8, 0.1], {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}
    )
    assert pool.parent_ids == ("A", "B", "C") and pool.members == ((0, 2), (1,), (3,))
    summed = aggregate_to_parents(["a1", "b1", "a2"], [0.9, 0.85, 0.8], {"a1": "A", "a2": "A", "b1": "B"}, how="sum")
    assert summed.parent_ids == ("A", "B") and summed.scores[0] == pytest.approx(1.0)
    with pytest.raises(ConformalError, match="no parent"):
        aggregate_to_parents(["a1", "x"], [0.9, 0.5], {"a1": "A"})
    with pytest.raises(ConformalError, match="sorted"):
        aggregate_to_parents(["a1", "a2"], [0.5, 0.9], {"a1": "A", "a2": "A"})
    with pytest.raises(ConformalError, match="aggregation"):
        aggregate_to_parents(["a1"], [0.5], {"a1": "A"}, how="mean")
    chunks = CandidatePool(("a1", "b1"), ("x", "y"), np.array([0.9, 0.8]))
    with pytest.raises(ConformalError, match="'B' is not in the store"):
        to_parent_pool(chunks, {"a1": "A", "b1": "B"}, {"A": "x and more"})


def test_pool_miss_warning_names_a_larger_pool() -> None:
    assert pool_miss_advice(5, 100, 0.1, 50) is None  # exactly alpha/2 is fine
    text = pool_miss_advice(6, 100, 0.1, 50, {50: 0.06, 100: 0.03})
    assert "6 of 100" in text and "pool of 100 misses 3.0%" in text
    assert "Even a pool of 200" in pool_miss_advice(9, 100, 0.1, 50, {100: 0.08, 200: 0.07})
    fp = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
    obs = [PoolObservation(np.array([0.9, 0.5]), (0,))] * 40 + [PoolObservation(np.array([0.9, 0.5]), ())] * 3
    with pytest.warns(PoolMissWarning, match="3 of 43"):
        calibrate_from_pools(
            obs,
            fingerprint=fp,
            pool_size=2,
            options=RetrievalOptions(confidence_level=0.9, score="relative"),
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PoolMissWarning)
        calibrate_from_pools(
            obs[:41],
            fingerprint=fp,
            pool_size=2,
            options=RetrievalOptions(confidence_level=0.9, score="relative"),
        )


def test_skipping_ineligible_larger_pools_changes_nothing() -> None:
    """``evaluate`` does not retrieve larger pools when no trial could choose them; the result must be identical."""
    from conformal_rag_plugins.core.config_search import larger_pools_eligible

    rng = np.random.default_rng(5)
    base = _random_obs(rng, 200, miss=0.0)
    larger = [
        PoolObservation(
            np.concatenate([o.scores, o.scores[-1:] - 0.5]), o.gold_positions, costs=np.append(o.costs, 9.0)
        )
        for o in base
    ]
    assert not larger_pools_eligible({"a": base}, 0.1, splits=RandomSplits(trials=30, seed=4))
    with_larger, _ = evaluate_tuned_splits(
        {"a": base, "a@100": larger},
        0.1,
        splits=RandomSplits(trials=30, seed=4),
        objective="tokens",
        base_of={"a@100": "a"},
    )
    without, _ = evaluate_tuned_splits({"a": base}, 0.1, splits=RandomSplits(trials=30, seed=4), objective="tokens")
    assert with_larger.as_row() == without.as_row()
    missing = [PoolObservation(o.scores, ()) if i % 4 == 0 else o for i, o in enumerate(base)]
    assert larger_pools_eligible({"a": missing}, 0.1, splits=RandomSplits(trials=30, seed=4))


def test_a_setting_that_cannot_reach_the_level_is_not_chosen_for_its_cheap_pool() -> None:
    """A pool missing more than alpha gets threshold +inf and keeps its whole (cheap) pool; it must not win."""
    hit = PoolObservation(np.array([0.9, 0.8]), (0,), costs=np.full(2, 10.0))
    miss = PoolObservation(np.array([0.9, 0.8]), (), costs=np.full(2, 10.0))
    tiny = [miss] * 8 + [hit] * 32  # misses 20% > alpha: covers 80% at best, reads 20 tokens
    big = [PoolObservation(np.array([0.9, 0.5, 0.4]), (0,), costs=np.full(3, 100.0))] * 40
    choice = choose_configuration({"tiny": tiny, "big": big}, 0.1, families=("relative",), objective="tokens")
    assert choice.config == "big" and choice.infeasible == ("tiny",)
    # the negative control: without the rule the cheap, infeasible pool would win
    assert choice_without_rule(tiny, big) == "tiny"
    # when nothing is feasible, all compete
    assert choose_configuration({"tiny": tiny}, 0.1, objective="tokens").infeasible == ()


def choice_without_rule(tiny, big) -> str:
    matrices = {k: PoolMatrix.from_observations(v, ("relative",)) for k, v in {"tiny": tiny, "big": big}.items()}
    from conformal_rag_plugins.core.quantile import conformal_quantile

    costs = {}
    for key, m in matrices.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = conformal_quantile(m.gold["relative"], 0.1)
        costs[key] = float(m.evaluate("relative", q)[2].mean())
    return min(costs, key=costs.get)
