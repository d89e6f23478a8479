"""Unit tests for decide_set (min_k padding, max_k cutting, +inf thresholds)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.core.retrieval_scores import SCORE_FAMILIES, keep_mask
from conformal_rag_plugins.core.selection import SetDecision, check_k_bounds, decide_set

POOL = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]


def test_plain_threshold_is_guaranteed():
    d = decide_set("relative", POOL, 0.15)
    assert d == SetDecision(indices=(0, 1), conformal_size=2, guaranteed=True, reason="")


def test_min_k_pads_with_the_next_best_and_keeps_the_guarantee():
    d = decide_set("rank", POOL, 1.0, min_k=3)
    assert d.indices == (0, 1, 2)
    assert d.conformal_size == 1  # the conformal set itself is reported, not the padded one
    assert d.guaranteed is True  # a superset of the conformal set still covers
    assert d.reason == ""
    # min_k smaller than the conformal set changes nothing
    assert decide_set("rank", POOL, 4.0, min_k=2).indices == (0, 1, 2, 3)
    # min_k larger than the pool pads to the whole pool
    assert decide_set("rank", POOL, 0.0, min_k=10).indices == tuple(range(len(POOL)))
    # min_k = 0 is allowed and an empty conformal set stays empty
    assert decide_set("similarity", POOL, -0.95, min_k=0).indices == ()


def test_max_k_cut_loses_the_guarantee_with_a_reason():
    d = decide_set("rank", POOL, 5.0, max_k=2)
    assert d.indices == (0, 1)
    assert d.conformal_size == 5
    assert d.guaranteed is False
    assert "max_k=2" in d.reason
    assert "5" in d.reason
    # a cap that does not bind keeps the guarantee
    d = decide_set("rank", POOL, 2.0, max_k=2)
    assert d.indices == (0, 1)
    assert d.guaranteed is True
    assert d.reason == ""


def test_inf_threshold_returns_the_pool_but_is_not_guaranteed():
    d = decide_set("similarity", POOL, math.inf)
    assert d.indices == tuple(range(len(POOL)))
    assert d.conformal_size == len(POOL)
    assert d.guaranteed is False
    assert "+inf" in d.reason
    # with a cut as well, the cut is reported
    d = decide_set("relative", POOL, math.inf, max_k=3)
    assert d.indices == (0, 1, 2)
    assert d.guaranteed is False
    assert "max_k=3" in d.reason


def test_min_k_and_max_k_together():
    d = decide_set("rank", POOL, 1.0, min_k=2, max_k=4)
    assert d.indices == (0, 1)
    assert d.guaranteed is True
    d = decide_set("rank", POOL, 6.0, min_k=2, max_k=4)
    assert d.indices == (0, 1, 2, 3)
    assert d.guaranteed is False
    d = decide_set("rank", POOL, 3.0, min_k=3, max_k=3)
    assert d.indices == (0, 1, 2)
    assert d.guaranteed is True


@pytest.mark.parametrize(("min_k", "max_k"), [(3, 2), (5, 1), (2, 0), (-1, None), (None, 0), (None, -3)])
def test_bad_bounds_raise(min_k, max_k):
    with pytest.raises(ConformalError):
        check_k_bounds(min_k, max_k)
    with pytest.raises(ConformalError):
        decide_set("rank", POOL, 2.0, min_k=min_k, max_k=max_k)


def test_crossed_bounds_message_names_both():
    with pytest.raises(ConformalError, match=r"max_k \(2\) must be >= min_k \(3\)"):
        decide_set("rank", POOL, 2.0, min_k=3, max_k=2)


def test_valid_bounds_pass():
    check_k_bounds(None, None)
    check_k_bounds(0, 1)
    check_k_bounds(3, 3)


def test_empty_pool():
    d = decide_set("relative", [], 0.3, min_k=2)
    assert d.indices == ()
    assert d.conformal_size == 0


@settings(deadline=None, max_examples=100)
@given(
    scores=st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=20).map(lambda s: sorted(s, reverse=True)),
    family=st.sampled_from(SCORE_FAMILIES),
    q=st.one_of(st.floats(-6, 25, allow_nan=False), st.just(math.inf)),
    min_k=st.one_of(st.none(), st.integers(0, 25)),
    extra=st.one_of(st.none(), st.integers(0, 25)),
)
def test_property_decision_invariants(scores, family, q, min_k, extra):
    max_k = None if extra is None else max(1, (min_k or 0) + extra)
    d = decide_set(family, scores, q, min_k=min_k, max_k=max_k)
    conformal = [i for i, keep in enumerate(keep_mask(family, scores, q)) if keep]
    assert d.conformal_size == len(conformal)
    assert list(d.indices) == list(range(len(d.indices)))  # always the top of the pool
    if max_k is not None:
        assert len(d.indices) <= max_k
    if min_k is not None:
        assert len(d.indices) >= min(min_k, len(scores))
    cut = max_k is not None and len(d.indices) < len(conformal)
    if not cut:
        assert set(conformal) <= set(d.indices)
    assert d.guaranteed == (not cut and not math.isinf(q))
    assert (d.reason == "") == d.guaranteed
