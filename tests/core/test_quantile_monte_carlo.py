"""Seeded Monte-Carlo checks that the thresholds deliver their guarantees on continuous scores.

Each check compares an average with its exact expected value under a tolerance of 4 standard
deviations computed from theory (not from the simulated data), and each comes with a power check:
the same tolerance rejects a plausible wrong implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from conformal_rag_plugins.core.binomial import binom_cdf
from conformal_rag_plugins.core.quantile import conformal_quantile, conformal_rank, pac_quantile, pac_rank

# The plain rank (a pool that cannot miss); the rule for pools that can is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

REPS = 2000
SIGMAS = 4.0


def _draw(seed: int, n: int, m: int, reps: int = REPS) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` calibration sets of size n and m fresh test scores each (standard normal, continuous)."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((reps, n + m))
    return data[:, :n], data[:, n:]


@pytest.mark.parametrize(("n", "alpha", "reps", "seed"), [(99, 0.1, REPS, 20240), (19, 0.1, 10_000, 7)])
def test_split_conformal_coverage_one_fresh_test_point(n, alpha, reps, seed):
    """With one test point per repetition, covered ~ Bernoulli(k/(n+1)) exactly, iid over reps."""
    cal, test = _draw(seed, n, 1, reps)
    k = conformal_rank(n, alpha)
    exact = k / (n + 1)
    assert exact == pytest.approx(1 - alpha)  # (n+1) alpha is an integer in both cases
    q = np.array([conformal_quantile(c, alpha) for c in cal])
    coverage = float(np.mean(test[:, 0] <= q))
    tol = SIGMAS * math.sqrt(exact * (1 - exact) / reps)
    assert abs(coverage - exact) <= tol, (coverage, exact, tol)
    if n == 19:
        # power: without the +1 correction (np.quantile at 1-alpha, h = 0.9*18 = 16.2) coverage is
        # 17.2/20 = 0.86, about 9 sigma below 0.9 with 10,000 repetitions
        q_naive = np.quantile(cal, 1 - alpha, axis=1)
        naive = float(np.mean(test[:, 0] <= q_naive))
        assert naive < exact - tol, (naive, exact, tol)


@pytest.mark.parametrize(("n", "seed"), [(99, 99), (100, 100)])
def test_split_conformal_coverage_many_test_points_detects_missing_correction(n, seed):
    """alpha = 0.1: E[coverage] = k/(n+1) exactly (0.9 for n = 99, 91/101 for n = 100); the
    uncorrected quantile gives about 0.892, and so does the rank ceil(n(1-alpha)) at n = 100.

    Per repetition, coverage given the calibration draw is C = F(q) ~ Beta(k, n+1-k), and the
    fraction of m fresh test points covered is Binomial(m, C)/m, so its variance is
    Var(C) + E[C(1-C)]/m. Repetitions are iid, which fixes the tolerance in advance.
    """
    alpha, m = 0.1, 200
    cal, test = _draw(seed, n, m)
    k = conformal_rank(n, alpha)
    mu = k / (n + 1)
    assert k == math.ceil((n + 1) * 0.9 - 1e-9)
    assert 1 - alpha <= mu < 1 - alpha + 1 / (n + 1)
    var_c = mu * (1 - mu) / (n + 2)
    var_rep = var_c + (mu * (1 - mu) - var_c) / m
    tol = SIGMAS * math.sqrt(var_rep / REPS)
    assert tol < 0.004  # small enough to see a one-rank error (0.008)

    q = np.array([conformal_quantile(c, alpha) for c in cal])
    per_rep = np.mean(test <= q[:, None], axis=1)
    coverage = float(per_rep.mean())
    assert abs(coverage - mu) <= tol, (coverage, mu, tol)
    # the marginal upper bound 1 - alpha + 1/(n+1) also holds (no ties)
    assert coverage <= 1 - alpha + 1 / (n + 1) + tol

    # power 1: numpy's uncorrected empirical quantile under-covers
    q_naive = np.quantile(cal, 1 - alpha, axis=1)
    naive = float(np.mean(test <= q_naive[:, None]))
    assert naive < mu - tol, (naive, mu, tol)
    # power 2: the (k-1)-th smallest score (one rank too small, E[coverage] = (k-1)/(n+1)) also fails
    q_low = np.sort(cal, axis=1)[:, k - 2]
    low = float(np.mean(test <= q_low[:, None]))
    assert low < mu - tol, (low, mu, tol)


@pytest.mark.parametrize(("n", "eps", "delta", "seed"), [(99, 0.1, 0.1, 11), (200, 0.05, 0.2, 12)])
def test_pac_threshold_miscoverage_exceeds_eps_rarely(n, eps, delta, seed):
    """P(miscoverage > eps) over calibration draws is BinomCDF(n-k; n, eps) <= delta."""
    cal, _ = _draw(seed, n, 0)
    k = pac_rank(n, eps, delta)
    assert k is not None
    p_bad = binom_cdf(n - k, n, eps)
    assert p_bad <= delta

    q = np.array([pac_quantile(c, eps, delta) for c in cal])
    miscoverage = stats.norm.sf(q)  # exact miscoverage of each threshold for N(0, 1) test scores
    frac_bad = float(np.mean(miscoverage > eps))
    tol_delta = SIGMAS * math.sqrt(delta * (1 - delta) / REPS)
    assert frac_bad <= delta + tol_delta, (frac_bad, delta)
    # and it matches the exact binomial value
    tol_exact = SIGMAS * math.sqrt(max(p_bad * (1 - p_bad), 1e-4) / REPS)
    assert abs(frac_bad - p_bad) <= tol_exact, (frac_bad, p_bad)

    # power: the marginal split-conformal rank at alpha = eps is not PAC (bad about half the time)
    q_split = np.array([conformal_quantile(c, eps) for c in cal])
    frac_split = float(np.mean(stats.norm.sf(q_split) > eps))
    assert frac_split > delta + tol_delta, (frac_split, delta)
