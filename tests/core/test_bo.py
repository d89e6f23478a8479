"""Bayesian optimisation of the alpha split and HMP weight: full range, determinism, never worse than equal."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.bo import BOResult, minimize_1d, optimize_alpha_split, optimize_hmp_weight
from conformal_rag_plugins.core.combination import bonferroni_thresholds, harmonic_mean_rule
from conformal_rag_plugins.core.errors import ConformalError, InfiniteThresholdWarning

ALPHA = 0.1
N_CALLS = 10


# ----------------------------------------------------------------------------- synthetic RAG data


def _synthetic(n: int, seed: int) -> dict[str, np.ndarray]:
    """n questions x 8 candidate chunks x 5 answer clusters, with global answer ids per question.

    Chunk 0 is gold. Its retrieval nonconformity is small when retrieval is easy; the generator
    puts most confidence on the correct answer (id 0) when the gold chunk is in context.
    """
    rng = np.random.default_rng(seed)
    n_chunks, n_clusters, n_ids = 8, 5, 12
    difficulty = rng.uniform(size=n)
    r_ret = np.sort(rng.normal(size=(n, n_chunks)), axis=1)  # candidate scores, nonconformity per chunk
    gold_rank = np.minimum((difficulty * rng.uniform(size=n) * n_chunks).astype(int), n_chunks - 1)
    gold_r = r_ret[np.arange(n), gold_rank]
    counts = rng.multinomial(10, [0.4, 0.25, 0.15, 0.12, 0.08], size=(n, n_chunks)).astype(float)
    ids = rng.integers(1, n_ids, size=(n, n_chunks, n_clusters))
    ids[np.arange(n), gold_rank, 0] = 0  # the gold chunk's most frequent cluster is correct ...
    wrong = rng.uniform(size=n) < 0.3 * difficulty  # ... unless the LLM is wrong on this question
    ids[np.arange(n)[wrong], gold_rank[wrong], 0] = 1
    conf = counts / 10.0
    gen_score = np.where(wrong, math.inf, -conf[np.arange(n), gold_rank, 0])
    gen_score[conf[np.arange(n), gold_rank, 0] == 0] = math.inf
    return {"r_ret": r_ret, "conf": conf, "ids": ids, "cal_ret": gold_r, "cal_gen": gen_score, "n_ids": n_ids}


def _mean_semantic_size(data: dict, keep: np.ndarray) -> float:
    """Mean number of distinct answer ids (semantic clusters) among the kept (chunk, cluster) pairs."""
    onehot = data["ids"][..., None] == np.arange(data["n_ids"])
    present = (keep[..., None] & onehot).any(axis=(1, 2))
    return float(present.sum(axis=1).mean())


def _bonferroni_objective(data: dict):
    """Objective on an optimisation split: thresholds on its first half, sizes on its second half."""
    n = data["r_ret"].shape[0] // 2
    cal_ret, cal_gen = data["cal_ret"][:n], data["cal_gen"][:n]
    test = {k: (v[n:] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    calls = []

    def objective(a_ret: float, a_gen: float) -> float:
        calls.append((a_ret, a_gen))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            t = bonferroni_thresholds(cal_ret, cal_gen, a_ret + a_gen, alpha_ret=a_ret)
        keep = (test["r_ret"][..., None] <= t.q_ret) & (-test["conf"] <= t.q_gen)
        return _mean_semantic_size(test, keep)

    return objective, calls


# ----------------------------------------------------------------------------- tests


def test_bo_alpha_split_never_worse_than_equal_on_optimisation_data():
    opt = _synthetic(600, seed=1)
    objective, calls = _bonferroni_objective(opt)
    res = optimize_alpha_split(objective, ALPHA, n_calls=N_CALLS, random_state=0)
    equal = objective(ALPHA / 2, ALPHA / 2)
    assert res.baseline == ALPHA / 2
    assert res.baseline_objective == equal
    assert res.objective <= equal
    assert res.objective == min(y for _, y in res.evaluations)
    assert res.alpha_ret + res.alpha_gen == pytest.approx(ALPHA, abs=1e-12)
    assert objective(res.alpha_ret, res.alpha_gen) == res.objective  # reproducible on the same data
    # every candidate was scored with alpha_ret + alpha_gen = alpha, inside the full open range
    for a_ret, a_gen in calls:
        assert a_ret + a_gen == pytest.approx(ALPHA, abs=1e-12)
        assert 1e-3 * ALPHA - 1e-15 <= a_ret <= (1 - 1e-3) * ALPHA + 1e-15
    assert len(res.evaluations) == N_CALLS + 1


@pytest.mark.parametrize("shape", ["equal_is_best", "plateau", "adversarial"])
def test_bo_returns_equal_split_when_bo_does_not_beat_it(shape):
    def objective(a_ret: float, a_gen: float) -> float:
        x = a_ret / ALPHA
        if shape == "equal_is_best":
            return 3.0 + (x - 0.5) ** 2
        if shape == "plateau":
            return 4.0  # flat: ties go to the equal split
        return 5.0 if abs(x - 0.5) < 1e-12 else 5.0 + 1e-3 + 0.01 * math.sin(40 * x) ** 2

    res = optimize_alpha_split(objective, ALPHA, n_calls=6, random_state=0)
    assert res.source == "equal"
    assert res.value == ALPHA / 2
    assert res.objective == res.baseline_objective


def test_bo_searches_the_full_open_range():
    """TRAQ's softmax restricts the split to about [0.27, 0.73] alpha; here both ends are reachable."""
    low = optimize_alpha_split(lambda a_ret, a_gen: a_ret, ALPHA, n_calls=8, random_state=0)
    assert low.source == "bo"
    assert low.bounds == pytest.approx((1e-3 * ALPHA, (1 - 1e-3) * ALPHA))
    assert low.alpha_ret < 0.1 * ALPHA
    high = optimize_alpha_split(lambda a_ret, a_gen: a_gen, ALPHA, n_calls=8, random_state=0)
    assert high.alpha_ret > 0.9 * ALPHA


def test_bo_is_deterministic():
    def f(x: float) -> float:
        return (x - 0.3) ** 2 + 0.05 * math.sin(25 * x)

    a = minimize_1d(f, (0.0, 1.0), 0.5, n_calls=7, random_state=3)
    b = minimize_1d(f, (0.0, 1.0), 0.5, n_calls=7, random_state=3)
    assert a.evaluations == b.evaluations
    assert a == b


def test_hmp_weight_optimisation_never_worse_than_half():
    opt = _synthetic(500, seed=2)
    n = 250
    rest = {k: (v[n:] if isinstance(v, np.ndarray) else v) for k, v in opt.items()}

    def objective(w: float) -> float:
        rule = harmonic_mean_rule(opt["cal_ret"][:n], opt["cal_gen"][:n], ALPHA, w_ret=w)
        keep = rule.include(rest["r_ret"][..., None], -rest["conf"])
        return _mean_semantic_size(rest, keep)

    res = optimize_hmp_weight(objective, n_calls=8, random_state=0)
    assert res.parameter == "w_ret"
    assert res.bounds == pytest.approx((1e-3, 1 - 1e-3))
    assert res.objective <= objective(0.5) == res.baseline_objective
    with pytest.raises(ConformalError):
        _ = res.alpha_ret  # a weight, not an alpha split


def test_bo_rejects_bad_inputs():
    with pytest.raises(ConformalError, match="finite"):
        optimize_alpha_split(lambda a, b: math.inf, ALPHA, n_calls=2)
    with pytest.raises(ConformalError, match="finite"):
        optimize_hmp_weight(lambda w: math.nan if w != 0.5 else 1.0, n_calls=2)
    with pytest.raises(ConformalError, match="n_calls"):
        optimize_alpha_split(lambda a, b: 1.0, ALPHA, n_calls=0)
    with pytest.raises(ConformalError):
        optimize_alpha_split(lambda a, b: 1.0, 1.5)
    with pytest.raises(ConformalError, match="baseline"):
        minimize_1d(lambda x: x, (0.0, 1.0), 2.0)


def test_bo_result_properties():
    r = BOResult("alpha_ret", 0.02, 1.0, 0.05, 2.0, "bo", (1e-4, 0.0999), ((0.05, 2.0), (0.02, 1.0)), total=0.1)
    assert (r.alpha_ret, r.alpha_gen) == pytest.approx((0.02, 0.08))
