"""The numbers behind the report's figures, each checked against a direct computation."""

from __future__ import annotations

import math
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.core.baselines import conflare_threshold
from conformal_rag_plugins.core.coverage_band import beta_binomial_pmf, split_conformal_band
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.report.data import (
    answer_set_summary,
    coverage_grid,
    score_distribution,
    set_size_comparison,
)
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "m", 384, "exp(-distance)", "dense(default)")


def _observations(n: int, seed: int, pool: int = 20, miss_rate: float = 0.05) -> list[PoolObservation]:
    """Pools of descending similarity scores; the gold sits at a geometric rank, or outside the pool."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        scores = np.sort(rng.uniform(0.2, 0.9, pool))[::-1]
        rank = int(rng.geometric(0.4)) - 1
        gold = () if rng.random() < miss_rate or rank >= pool else (rank,)
        out.append(PoolObservation(scores, gold))
    return out


def _calibration(obs: list[PoolObservation], alpha: float = 0.1, family: str = "similarity") -> RetrievalCalibration:
    scores = tuple(o.score(family) for o in obs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = conformal_quantile(scores, alpha)
    misses = sum(1 for s in scores if math.isinf(s))
    return RetrievalCalibration(q, alpha, "split", family, 20, len(scores), misses, scores, FP)


@pytest.fixture(scope="module")
def cal_and_test():
    obs = _observations(600, seed=3)
    return _calibration(obs[:200]), obs[200:]


def test_coverage_on_the_grid_equals_a_direct_computation(cal_and_test) -> None:
    cal, test = cal_and_test
    grid = coverage_grid(cal, test, levels=(0.6, 0.8, 0.95))
    assert grid.levels == (0.6, 0.8, 0.9, 0.95)  # the calibrated level is added
    for level, cov, q, size in zip(grid.levels, grid.coverage, grid.thresholds, grid.mean_set_size, strict=True):
        direct_q = conformal_quantile(cal.scores_, 1 - level)
        hits = [any(-o.scores[p] <= direct_q for p in o.gold_positions) for o in test]
        kept = [int((-o.scores <= direct_q).sum()) for o in test]
        assert q == direct_q and cov == pytest.approx(np.mean(hits)) and size == pytest.approx(np.mean(kept))
    assert grid.n_calibration == 200 and grid.n_test == 400
    data = grid.to_dict()
    assert data["levels"] == [0.6, 0.8, 0.9, 0.95] and "Beta-Binomial" in data["band"]


def test_the_band_is_the_beta_binomial_law_of_split_conformal_coverage() -> None:
    # pmf against exact rationals: C(m, j) B(j + a, m - j + b) / B(a, b) for integer a, b
    m, a, b = 7, 5, 3

    def beta(x: int, y: int) -> Fraction:
        return Fraction(math.factorial(x - 1) * math.factorial(y - 1), math.factorial(x + y - 1))

    exact = [float(math.comb(m, j) * beta(j + a, m - j + b) / beta(a, b)) for j in range(m + 1)]
    assert beta_binomial_pmf(m, a, b) == pytest.approx(exact, rel=1e-10)
    # the band's ends are the 2.5% / 97.5% quantiles of that law
    n, n_test, alpha = 40, 30, 0.2
    k = math.ceil((n + 1) * (1 - alpha))
    cdf = np.cumsum(beta_binomial_pmf(n_test, k, n + 1 - k))
    lo, hi = split_conformal_band(n, n_test, alpha)
    assert cdf[round(lo * n_test)] >= 0.025 > (cdf[round(lo * n_test) - 1] if lo > 0 else 0)
    assert cdf[round(hi * n_test)] >= 0.975 > cdf[round(hi * n_test) - 1]
    assert all(math.isnan(x) for x in split_conformal_band(5, 10, 0.1))  # +inf threshold: no band


def test_held_out_coverage_stays_in_the_band_and_a_wrong_rule_leaves_it() -> None:
    """1000 seeded calibration/test draws of continuous scores: the split-conformal threshold's
    held-out coverage falls outside the 95% band at most ~5% of the time (binomial tolerance);
    the negative control, a threshold computed at 1.5 alpha but reported as alpha, falls outside
    far more often."""
    rng = np.random.default_rng(11)
    n, n_test, alpha, reps = 100, 100, 0.2, 1000
    lo, hi = split_conformal_band(n, n_test, alpha)
    outside = {"split": 0, "wrong": 0}
    for _ in range(reps):
        cal, test = rng.random(n), rng.random(n_test)
        for name, q in (("split", conformal_quantile(cal, alpha)), ("wrong", conformal_quantile(cal, 1.5 * alpha))):
            cov = float(np.mean(test <= q))
            outside[name] += not (lo <= cov <= hi)
    tolerance = 0.05 * reps + 3 * math.sqrt(reps * 0.05 * 0.95)
    assert outside["split"] <= tolerance, outside
    assert outside["wrong"] > 2 * tolerance, outside  # 313 of 1000 with this seed


def test_set_size_histograms_count_every_held_out_question(cal_and_test) -> None:
    cal, test = cal_and_test
    cmp = set_size_comparison(cal, test, topk=(1, 5), seed=4)
    assert list(cmp.methods) == ["conformal", "topk@1", "topk@5", "conflare"]
    direct = [int((-o.scores <= cal.threshold_).sum()) for o in test]
    hist = cmp.histogram("conformal")
    assert sum(hist.values()) == len(test)
    assert hist == {s: direct.count(s) for s in set(direct)}
    assert cmp.histogram("topk@5") == {5: len(test)}
    assert cmp.methods["topk@1"].coverage == pytest.approx(np.mean([0 in o.gold_positions for o in test]))
    data = cmp.to_dict()
    assert data["methods"]["conformal"]["histogram"] == {str(k): v for k, v in hist.items()}


def test_conflare_is_cross_fitted_on_two_halves(cal_and_test) -> None:
    _, test = cal_and_test
    cal = _calibration(_observations(200, seed=5), alpha=0.2)
    got = set_size_comparison(cal, test, topk=(), seed=9).methods["conflare"]
    order = np.random.default_rng(9).permutation(len(test))
    halves = [order[: len(test) // 2], order[len(test) // 2 :]]
    sizes = {}
    for fit, apply in ((halves[0], halves[1]), (halves[1], halves[0])):
        q = conflare_threshold([d for i in fit if math.isfinite(d := test[i].score("similarity"))], 0.2)
        for i in apply:
            sizes[int(i)] = int((-test[i].scores < q).sum())
    assert got.sizes == tuple(sizes[i] for i in range(len(test)))


def test_misses_are_counted_not_drawn(cal_and_test) -> None:
    cal, test = cal_and_test
    dist = score_distribution(cal, test)
    n_inf = sum(1 for s in cal.scores_ if math.isinf(s))
    assert n_inf > 0 and dist.n_misses == n_inf == cal.n_misses_
    assert len(dist.scores) == len(cal.scores_) - n_inf and all(math.isfinite(s) for s in dist.scores)
    assert dist.heldout_misses == sum(1 for o in test if not o.gold_positions)
    assert dist.n_above == sum(1 for s in cal.scores_ if s > cal.threshold_)
    assert dist.to_dict()["n_above_threshold"] == dist.n_above


def test_answer_set_summary_recomputes_every_method(cal_and_test) -> None:
    cal, test = cal_and_test
    rng = np.random.default_rng(2)
    gen = tuple(math.inf if rng.random() < 0.1 else -float(rng.uniform(0.2, 1)) for _ in cal.scores_)
    ans = AnswerSetCalibration.from_stages(cal, gen, alpha=0.4, n_samples=5, model="m", clustering={})
    summary = answer_set_summary(ans, test)
    assert summary.coverage_ceiling == pytest.approx(ans.coverage_ceiling_)
    assert summary.n_generator_misses == sum(1 for g in gen if math.isinf(g))
    assert summary.generator_target == pytest.approx(0.8)
    assert set(summary.methods) == {"bonferroni", "pac", "hmp"}
    for name, m in summary.methods.items():
        split = SplitOptions(method=name, delta=0.1 if name == "pac" else None)
        other = AnswerSetCalibration.from_stages(
            cal, gen, alpha=0.4, split=split, n_samples=5, model="m", clustering={}
        )
        q = other.retrieval_stage().threshold_
        assert m["retrieval_threshold"] == q
        assert m["coverage"] == pytest.approx(np.mean([o.covered_and_size("similarity", q)[0] for o in test]))
    data = summary.to_dict()
    assert sum(data["methods"]["bonferroni"]["histogram"].values()) == len(test)


def test_no_held_out_question_is_refused(cal_and_test) -> None:
    cal, _ = cal_and_test
    with pytest.raises(CalibrationError, match="held-out"):
        coverage_grid(cal, [])


def test_every_plot_returns_a_figure_and_a_png(cal_and_test) -> None:
    pytest.importorskip("matplotlib")
    from conformal_rag_plugins.report.figures import build_figures
    from conformal_rag_plugins.report.notebook import (
        answer_sets_figure,
        coverage_figure,
        scores_figure,
        set_sizes_figure,
    )

    cal, test = cal_and_test
    fig = coverage_figure(cal, test)
    assert type(fig).__name__ == "Figure" and fig.axes[0].get_xlabel() == "target coverage 1 - alpha"
    assert len(set_sizes_figure(cal, test).axes) == 2 and scores_figure(cal).axes
    gen = (-0.5,) * len(cal.scores_)
    ans = AnswerSetCalibration.from_stages(cal, gen, alpha=0.4, n_samples=5, model="m", clustering={})
    assert len(answer_sets_figure(ans, test).axes) == 2
    figures, numbers = build_figures(cal, test, ans)
    assert [f.name for f in figures] == ["coverage.png", "set_sizes.png", "scores.png", "answer_sets.png"]
    assert all(f.png.startswith(b"\x89PNG") for f in figures)
    assert set(numbers) == {"verdict", "tie_levels", "coverage", "set_sizes", "scores", "answer_sets"}


def test_missing_matplotlib_names_the_plots_extra(monkeypatch, cal_and_test) -> None:
    cal, _ = cal_and_test
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConformalError, match=r"conformal-rag-plugins\[plots\]"):
        from conformal_rag_plugins.report.notebook import scores_figure

        scores_figure(cal)
