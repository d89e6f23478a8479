"""Unit tests for the exact binomial tail and the PAC quantile (checked against scipy)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from conformal_rag_plugins.core.binomial import binom_cdf, binom_cdf_all
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, InfiniteThresholdWarning
from conformal_rag_plugins.core.quantile import conformal_rank, pac_quantile, pac_rank

# The plain rank (a pool that cannot miss); the rule for pools that can is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

INF = math.inf


def scipy_pac_rank(n: int, eps: float, delta: float) -> int | None:
    """Brute force: smallest k in 1..n with BinomCDF(n-k; n, eps) <= delta."""
    if n < 1:
        return None
    ks = np.arange(1, n + 1)
    ok = np.flatnonzero(stats.binom.cdf(n - ks, n, eps) <= delta)
    return int(ks[ok[0]]) if ok.size else None


# --- binom_cdf -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 5, 17, 50, 100, 333, 1000, 5000])
@pytest.mark.parametrize("p", [1e-4, 0.01, 0.05, 0.1, 0.25, 0.5, 0.73, 0.9, 0.999])
def test_binom_cdf_all_matches_scipy(n, p):
    ours = binom_cdf_all(n, p)
    ref = stats.binom.cdf(np.arange(n + 1), n, p)
    assert ours.shape == (n + 1,)
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-13)
    assert np.all(np.diff(ours) >= 0)  # a CDF is non-decreasing
    assert ours[-1] == 1.0


@pytest.mark.parametrize(("x", "n", "p"), [(5, 10, 0.5), (0, 10, 0.1), (3, 100, 0.1), (90, 100, 0.9), (7, 20, 0.3)])
def test_binom_cdf_scalar_matches_scipy(x, n, p):
    assert binom_cdf(x, n, p) == pytest.approx(float(stats.binom.cdf(x, n, p)), rel=1e-10, abs=1e-15)


def test_binom_cdf_edges():
    assert binom_cdf(-1, 10, 0.5) == 0.0
    assert binom_cdf(10, 10, 0.5) == 1.0
    assert binom_cdf(11, 10, 0.5) == 1.0
    assert binom_cdf_all(3, 0.0).tolist() == [1.0, 1.0, 1.0, 1.0]  # X = 0 surely
    assert binom_cdf_all(3, 1.0).tolist() == [0.0, 0.0, 0.0, 1.0]  # X = n surely
    assert binom_cdf_all(2, 0.5).tolist() == [0.25, 0.75, 1.0]
    with pytest.raises(ValueError):
        binom_cdf_all(-1, 0.5)


def test_binom_cdf_deep_tail_is_accurate_in_relative_terms():
    # P(X <= 0) for Binomial(200, 0.1) = 0.9^200 ~ 7e-10: the PAC rule compares such tails with delta
    assert binom_cdf(0, 200, 0.1) == pytest.approx(0.9**200, rel=1e-9)
    assert binom_cdf(2, 500, 0.05) == pytest.approx(float(stats.binom.cdf(2, 500, 0.05)), rel=1e-8)


# --- pac_rank / pac_quantile ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 10, 20, 29, 50, 99, 100, 250, 1000])
@pytest.mark.parametrize("eps", [0.01, 0.05, 0.1, 0.2, 0.5])
@pytest.mark.parametrize("delta", [0.001, 0.01, 0.05, 0.1, 0.3])
def test_pac_rank_matches_scipy_brute_force(n, eps, delta):
    ref = scipy_pac_rank(n, eps, delta)
    ours = pac_rank(n, eps, delta)
    if ref is not None and abs(stats.binom.cdf(n - ref, n, eps) - delta) < 1e-9 * delta:
        pytest.skip("delta sits on a CDF value to within float error")  # pragma: no cover
    assert ours == ref
    if ours is not None:
        # defining property: k qualifies, k - 1 does not
        assert stats.binom.cdf(n - ours, n, eps) <= delta
        if ours > 1:
            assert stats.binom.cdf(n - ours + 1, n, eps) > delta


def test_pac_rank_docstring_value_and_monotonicity():
    assert pac_rank(100, 0.1, 0.1) == 95
    assert scipy_pac_rank(100, 0.1, 0.1) == 95
    # more confidence (smaller delta) needs a larger rank; larger epsilon allows a smaller one
    assert pac_rank(100, 0.1, 0.01) >= pac_rank(100, 0.1, 0.1) >= pac_rank(100, 0.1, 0.3)
    assert pac_rank(100, 0.05, 0.1) >= pac_rank(100, 0.1, 0.1) >= pac_rank(100, 0.2, 0.1)
    # PAC at (alpha, delta < 1/2) is more conservative than the marginal rank
    for n in (50, 100, 500):
        assert pac_rank(n, 0.1, 0.1) >= conformal_rank(n, 0.1)


def test_pac_rank_none_when_no_k_qualifies():
    # even k = n needs P(X <= 0) = (1-eps)^n <= delta: 0.9^10 = 0.349 > 0.1
    assert pac_rank(10, 0.1, 0.1) is None
    assert pac_rank(0, 0.1, 0.1) is None
    # boundary: 0.9^22 = 0.0985 <= 0.1 but 0.9^21 = 0.109 > 0.1
    assert pac_rank(21, 0.1, 0.1) is None
    assert pac_rank(22, 0.1, 0.1) == 22


def test_pac_quantile_returns_kth_smallest():
    scores = np.random.default_rng(3).permutation(np.arange(1, 101) / 100)
    assert pac_quantile(scores, 0.1, 0.1) == 0.95  # k = 95
    k = pac_rank(100, 0.05, 0.05)
    assert pac_quantile(scores, 0.05, 0.05) == sorted(scores)[k - 1]


def test_pac_quantile_inf_when_no_rank_qualifies():
    scores = [0.1 * i for i in range(10)]
    with pytest.warns(InfiniteThresholdWarning, match="No rank"):
        assert pac_quantile(scores, 0.1, 0.1) == INF
    with pytest.raises(CalibrationError, match="No rank"):
        pac_quantile(scores, 0.1, 0.1, strict=True)


def test_pac_quantile_rank_landing_on_a_miss_is_inf():
    k = pac_rank(100, 0.1, 0.1)  # 95: at most 5 misses keep a finite threshold
    ok = [float(i) for i in range(95)] + [INF] * 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pac_quantile(ok, 0.1, 0.1) == float(k - 1)
    bad = [float(i) for i in range(94)] + [INF] * 6
    with pytest.warns(InfiniteThresholdWarning, match="miss"):
        assert pac_quantile(bad, 0.1, 0.1) == INF
    with pytest.raises(CalibrationError):
        pac_quantile(bad, 0.1, 0.1, strict=True)


@pytest.mark.parametrize(("eps", "delta"), [(0.0, 0.1), (1.0, 0.1), (0.1, 0.0), (0.1, 1.0), (-1, 0.1)])
def test_pac_invalid_parameters(eps, delta):
    with pytest.raises(ConformalError):
        pac_quantile([0.1] * 50, eps, delta)


@settings(deadline=None, max_examples=200)
@given(
    scores=st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), min_size=1, max_size=300),
    eps_i=st.integers(1, 50),
    delta_i=st.integers(1, 50),
)
def test_property_pac_quantile_equals_sorted_at_pac_rank(scores, eps_i, delta_i):
    eps, delta = eps_i / 100, delta_i / 100
    k = pac_rank(len(scores), eps, delta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        q = pac_quantile(scores, eps, delta)
    if k is None:
        assert q == INF
    else:
        assert q == sorted(scores)[k - 1]
        # the certificate holds for the returned rank
        assert binom_cdf(len(scores) - k, len(scores), eps) <= delta
