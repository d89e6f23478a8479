"""Unit tests for the split-conformal quantile (core/quantile.py)."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, InfiniteThresholdWarning
from conformal_rag_plugins.core.quantile import (
    conformal_quantile,
    conformal_rank,
    coverage_bounds,
    min_calibration_size,
)

# The plain rank (a pool that cannot miss); the rule for pools that can is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

INF = math.inf
PROPERTY = settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
SECONDARY = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])


def exact_rank(n: int, alpha: Fraction) -> int:
    """ceil((n+1)(1-alpha)) in exact integer arithmetic (alpha a Fraction)."""
    num = (n + 1) * (alpha.denominator - alpha.numerator)
    return -(-num // alpha.denominator)


def quiet_quantile(scores, alpha, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return conformal_quantile(scores, alpha, **kw)


# --- hand-checked values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "alpha", "k"),
    [
        (100, 0.1, 91),  # ceil(101 * 0.9) = ceil(90.9)
        (99, 0.1, 90),  # ceil(100 * 0.9) = 90 exactly: no float round-up to 91
        (9, 0.1, 9),
        (8, 0.1, 9),  # exceeds n
        (19, 0.05, 19),
        (100, 0.05, 96),
        (1, 0.5, 1),
        (999, 0.001, 999),
        (29, 0.3, 21),  # 30 * 0.7 = 21 exactly; binary 0.3 < 3/10 would give 22 if not careful
        (9, 0.3, 7),
    ],
)
def test_conformal_rank_known_values(n, alpha, k):
    assert conformal_rank(n, alpha) == k


def test_conformal_quantile_returns_kth_smallest_of_unsorted_scores():
    rng = np.random.default_rng(0)
    scores = rng.permutation(np.arange(1, 21, dtype=float))  # 1..20 shuffled
    # n = 20, alpha = 0.1: k = ceil(21 * 0.9) = 19
    assert conformal_quantile(scores, 0.1) == 19.0
    # alpha = 0.25: k = ceil(21 * 0.75) = ceil(15.75) = 16
    assert conformal_quantile(list(scores), 0.25) == 16.0
    # alpha = 0.5: k = ceil(10.5) = 11
    assert conformal_quantile(tuple(scores), 0.5) == 11.0


def test_conformal_quantile_accepts_iterables_and_does_not_mutate_input():
    scores = np.array([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6])
    before = scores.copy()
    assert conformal_quantile(iter(scores.tolist()), 0.1) == 0.9  # n = 9, k = 9
    conformal_quantile(scores, 0.1)
    np.testing.assert_array_equal(scores, before)


def test_conformal_quantile_rank_exceeds_n_warns_and_returns_inf():
    scores = [0.1 * i for i in range(1, 9)]  # n = 8, alpha = 0.1: k = 9 > 8
    with pytest.warns(InfiniteThresholdWarning, match=r"exceeds n = 8") as record:
        q = conformal_quantile(scores, 0.1)
    assert q == INF
    # the message tells the user how many points they need
    assert "at least 9" in str(record[0].message)


def test_conformal_quantile_strict_raises_instead_of_inf():
    with pytest.raises(CalibrationError, match="exceeds n"):
        conformal_quantile([0.1, 0.2, 0.3], 0.1, strict=True)
    # CalibrationError is a ConformalError and a ValueError
    with pytest.raises(ValueError):
        conformal_quantile([0.1, 0.2, 0.3], 0.1, strict=True)
    # strict does not change a finite answer and emits no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert conformal_quantile([float(i) for i in range(10)], 0.1, strict=True) == 9.0


def test_finite_threshold_emits_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert conformal_quantile(np.linspace(0, 1, 99), 0.1) == pytest.approx(np.linspace(0, 1, 99)[89])


def test_ties_are_returned_and_the_value_is_a_score():
    scores = [1.0] * 5 + [2.0] * 5 + [3.0] * 5  # n = 15, alpha = 0.2: k = ceil(16 * 0.8) = 13
    assert conformal_quantile(scores, 0.2) == 3.0
    # alpha = 0.4: k = ceil(16 * 0.6) = ceil(9.6) = 10 -> the 10th smallest is 2.0
    assert conformal_quantile(scores, 0.4) == 2.0
    # all equal: every point ties with the threshold
    assert conformal_quantile([0.7] * 30, 0.1) == 0.7


def test_misses_are_kept_not_dropped():
    # n = 99, alpha = 0.1: k = 90; floor(alpha (n+1)) = 10.
    finite = [i / 100 for i in range(1, 100 - 5)]  # 94 finite scores 0.01..0.94
    scores = finite + [INF] * 5
    q = conformal_quantile(scores, 0.1)
    # if the 5 misses were dropped, n would be 94 and k = ceil(95 * 0.9) = 86 -> 0.86
    assert q == pytest.approx(0.90)
    assert q != pytest.approx(conformal_quantile(finite, 0.1))


def test_misses_push_threshold_to_inf_exactly_at_n_minus_k_plus_one():
    """q-hat is +inf iff #misses > n - k, i.e. #misses >= floor(alpha (n+1)).

    With n = 99 and alpha = 0.1, k = 90 and floor(alpha (n+1)) = 10: 9 misses leave 90 finite
    scores (finite q-hat), 10 misses leave only 89 so the 90th smallest is a miss.
    """
    n, alpha = 99, 0.1
    k = conformal_rank(n, alpha)
    assert k == 90
    for misses in range(0, 15):
        scores = [float(i) for i in range(n - misses)] + [INF] * misses
        if misses <= n - k:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert conformal_quantile(scores, alpha) == float(k - 1)
        else:
            with pytest.warns(InfiniteThresholdWarning, match="misses"):
                assert conformal_quantile(scores, alpha) == INF
            with pytest.raises(CalibrationError, match="misses"):
                conformal_quantile(scores, alpha, strict=True)


def test_miss_message_is_consistent_with_the_count():
    scores = [float(i) for i in range(89)] + [INF] * 10  # n = 99, 10 misses, at most 9 allowed
    with pytest.warns(InfiniteThresholdWarning) as record:
        conformal_quantile(scores, 0.1)
    msg = str(record[0].message)
    assert "10 of 99" in msg
    # at most n - k = 99 - 90 = 9 misses are compatible with a finite threshold of rank 90
    assert "at most 9 " in msg
    assert "rank 90" in msg


@pytest.mark.parametrize("bad", [[], np.array([]), [0.1, float("nan")], [0.1, -INF]])
def test_invalid_scores_raise(bad):
    with pytest.raises(CalibrationError):
        conformal_quantile(bad, 0.1)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan"), "abc", None])
def test_invalid_alpha_raises(alpha):
    with pytest.raises(ConformalError):
        conformal_quantile([0.1] * 20, alpha)


@pytest.mark.parametrize(("alpha", "n_min"), [(0.1, 9), (0.05, 19), (0.2, 4), (0.5, 1), (0.01, 99), (0.3, 3)])
def test_min_calibration_size(alpha, n_min):
    assert min_calibration_size(alpha) == n_min
    assert conformal_rank(n_min, alpha) <= n_min
    if n_min > 1:
        assert conformal_rank(n_min - 1, alpha) > n_min - 1


@SECONDARY
@given(i=st.integers(min_value=1, max_value=9999))
def test_property_min_calibration_size_matches_brute_force(i):
    alpha = i / 10000
    n_min = min_calibration_size(alpha)
    assert n_min >= 1
    assert conformal_rank(n_min, alpha) <= n_min
    assert n_min == 1 or conformal_rank(n_min - 1, alpha) > n_min - 1
    # and in exact arithmetic: the smallest n with (n+1) alpha >= 1
    assert n_min == max(1, -(-10000 // i) - 1)


def test_min_calibration_size_is_fast_for_tiny_alpha():
    # closed form, not an O(1/alpha) loop
    assert min_calibration_size(1e-6) == 999_999
    assert conformal_rank(999_999, 1e-6) == 999_999
    assert conformal_rank(999_998, 1e-6) == 999_999


def test_coverage_bounds():
    assert coverage_bounds(99, 0.1) == pytest.approx((0.9, 0.91))
    lo, hi = coverage_bounds(19, 0.05)
    assert lo == pytest.approx(0.95)
    assert hi == pytest.approx(1.0)
    # rank exceeds n: the whole pool is returned, and coverage is only the chance the gold is in it
    assert coverage_bounds(5, 0.1) == (0.0, 1.0)
    # the exact coverage k/(n+1) always lies inside the bounds
    for n in (9, 10, 50, 99, 100, 1000):
        for alpha in (0.05, 0.1, 0.2):
            k = conformal_rank(n, alpha)
            if k <= n:
                lo, hi = coverage_bounds(n, alpha)
                assert lo - 1e-12 <= k / (n + 1) <= hi + 1e-12


# --- property tests ------------------------------------------------------------------------------

finite_scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
tied_scores = st.integers(min_value=-3, max_value=3).map(float)
score = st.one_of(finite_scores, tied_scores, st.just(INF))
score_lists = st.lists(score, min_size=1, max_size=80)
alpha_milli = st.integers(min_value=1, max_value=999)  # alpha = i / 1000 exactly as a decimal


@PROPERTY
@given(scores=score_lists, i=alpha_milli)
def test_property_equals_sorted_kth_with_exact_rank(scores, i):
    alpha = i / 1000
    n = len(scores)
    k = exact_rank(n, Fraction(i, 1000))
    assert conformal_rank(n, alpha) == k
    s = sorted(scores)
    expect_inf = k > n or math.isinf(s[k - 1])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        q = conformal_quantile(scores, alpha)
    warned = any(issubclass(w.category, InfiniteThresholdWarning) for w in record)
    if expect_inf:
        assert q == INF
        assert warned
        with pytest.raises(CalibrationError):
            conformal_quantile(scores, alpha, strict=True)
    else:
        assert q == s[k - 1]
        assert not warned


@PROPERTY
@given(scores=st.lists(st.one_of(finite_scores, tied_scores), min_size=1, max_size=80), i=alpha_milli)
def test_property_inf_exactly_when_rank_exceeds_n(scores, i):
    alpha = i / 1000
    n = len(scores)
    k = exact_rank(n, Fraction(i, 1000))
    q = quiet_quantile(scores, alpha)
    assert math.isinf(q) == (k > n)


@PROPERTY
@given(scores=score_lists, i=alpha_milli, j=alpha_milli)
def test_property_monotone_non_increasing_in_alpha(scores, i, j):
    lo, hi = sorted((i, j))
    assert quiet_quantile(scores, lo / 1000) >= quiet_quantile(scores, hi / 1000)


@PROPERTY
@given(scores=score_lists, i=alpha_milli)
def test_property_in_sample_fraction_at_least_k_over_n(scores, i):
    alpha = i / 1000
    n = len(scores)
    k = exact_rank(n, Fraction(i, 1000))
    q = quiet_quantile(scores, alpha)
    frac = sum(1 for s in scores if s <= q) / n
    assert frac >= min(k, n) / n
    if not math.isinf(q):
        # and at least 1 - alpha of the points (since k/n >= (n+1)(1-alpha)/n >= 1-alpha)
        assert frac >= 1 - alpha - 1e-12
        # q is the smallest value achieving that: strictly fewer than k points lie below it
        assert sum(1 for s in scores if s < q) < k


@SECONDARY
@given(scores=score_lists, i=alpha_milli, perm_seed=st.integers(0, 2**32 - 1))
def test_property_permutation_invariant(scores, i, perm_seed):
    shuffled = list(np.random.default_rng(perm_seed).permutation(np.asarray(scores, dtype=float)))
    assert quiet_quantile(scores, i / 1000) == quiet_quantile(shuffled, i / 1000)
