"""Unit tests for conformal p-values and their agreement with the quantile threshold."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.errors import CalibrationError, InfiniteThresholdWarning
from conformal_rag_plugins.core.pvalues import conformal_pvalue, conformal_pvalues
from conformal_rag_plugins.core.quantile import conformal_quantile

# The plain rank (a pool that cannot miss); the rule for pools that can is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

INF = math.inf


def brute_pvalue(cal, r) -> float:
    return (1 + sum(1 for x in cal if x >= r)) / (len(cal) + 1)


def test_pvalue_definition_small_example():
    cal = [0.1, 0.2, 0.3]
    # r = 0.2: #{r_i >= 0.2} = 2 (ties count) -> 3/4; r = 0.5: none -> 1/4; r = 0.0: all -> 1
    assert conformal_pvalues(cal, [0.2, 0.5, 0.0]).tolist() == [0.75, 0.25, 1.0]
    assert conformal_pvalue(cal, 0.25) == 0.5
    assert conformal_pvalue(cal, 0.3) == 0.5  # tie with the largest


def test_pvalue_range_and_misses():
    cal = [0.1, 0.2, INF, INF]
    # a miss in calibration is >= every finite r, so it raises the p-value of finite candidates
    assert conformal_pvalue(cal, 0.15) == pytest.approx(4 / 5)
    assert conformal_pvalue(cal, 1e9) == pytest.approx(3 / 5)
    # a candidate scored +inf ties with the misses only
    assert conformal_pvalue(cal, INF) == pytest.approx(3 / 5)
    p = conformal_pvalues(np.arange(50.0), np.linspace(-10, 60, 71))
    assert p.min() >= 1 / 51
    assert p.max() <= 1.0
    assert np.all(np.diff(p) <= 0)  # non-increasing in the test score


def test_pvalues_accept_numpy_and_reject_nan():
    cal = np.array([0.3, 0.1, 0.2])
    np.testing.assert_allclose(conformal_pvalues(cal, np.array([0.2])), [0.75])
    with pytest.raises(ValueError):
        conformal_pvalues(cal, [float("nan")])
    with pytest.raises(CalibrationError):
        conformal_pvalues([], [0.1])
    with pytest.raises(CalibrationError):
        conformal_pvalues([0.1, float("nan")], [0.1])


@settings(deadline=None, max_examples=100)
@given(
    cal=st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=60),
    test=st.lists(st.floats(-120, 120, allow_nan=False), min_size=1, max_size=20),
)
def test_property_pvalue_matches_brute_force(cal, test):
    ours = conformal_pvalues(cal, test)
    assert ours.tolist() == pytest.approx([brute_pvalue(cal, r) for r in test], abs=0)


@settings(deadline=None, max_examples=200)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 150),
    i=st.integers(1, 999),
    with_misses=st.booleans(),
)
def test_property_inclusion_matches_threshold_without_ties(seed, n, i, with_misses):
    """p > alpha  <=>  r <= q-hat, on continuous random data (no ties)."""
    alpha = i / 1000
    rng = np.random.default_rng(seed)
    cal = rng.standard_normal(n)
    if with_misses:
        cal[rng.random(n) < 0.1] = INF
    test = rng.standard_normal(200) * 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        q = conformal_quantile(cal, alpha)
    included = conformal_pvalues(cal, test) > alpha
    np.testing.assert_array_equal(included, test <= q)
    # also at the calibration scores themselves (the boundary cases: r equal to some r_i)
    finite = cal[np.isfinite(cal)]
    if finite.size:
        np.testing.assert_array_equal(conformal_pvalues(cal, finite) > alpha, finite <= q)


@settings(deadline=None, max_examples=100)
@given(
    cal=st.lists(st.integers(0, 5).map(float), min_size=1, max_size=40),
    i=st.integers(1, 999),
)
def test_property_inclusion_matches_threshold_even_with_ties(cal, i):
    """The equivalence also holds with heavy ties, because both use >= / <= (ties are covered)."""
    alpha = i / 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        q = conformal_quantile(cal, alpha)
    test = np.arange(-1.0, 7.0, 0.5)
    np.testing.assert_array_equal(conformal_pvalues(cal, test) > alpha, test <= q)
