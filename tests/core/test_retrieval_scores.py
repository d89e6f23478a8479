"""Unit tests for the retrieval nonconformity families (core/retrieval_scores.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.core.retrieval_scores import (
    SCORE_FAMILIES,
    candidate_nonconformity,
    keep_mask,
    nonconformity,
    set_size,
)

INF = math.inf
POOL = [0.9, 0.8, 0.8, 0.5, 0.2]  # best first, with a tie at positions 1 and 2


def test_families_are_the_documented_three():
    assert SCORE_FAMILIES == ("similarity", "rank", "relative")


@pytest.mark.parametrize(
    ("family", "gold", "expected"),
    [
        ("similarity", [0], -0.9),
        ("similarity", [3], -0.5),
        ("rank", [0], 1.0),
        ("rank", [3], 4.0),
        ("relative", [0], 0.0),
        ("relative", [3], 0.9 - 0.5),
        ("relative", [4], 0.9 - 0.2),
    ],
)
def test_nonconformity_values(family, gold, expected):
    assert nonconformity(family, POOL, gold) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("family", SCORE_FAMILIES)
def test_miss_is_inf(family):
    assert nonconformity(family, POOL, []) == INF
    assert nonconformity(family, POOL, ()) == INF
    assert nonconformity(family, [], []) == INF  # empty pool: a miss too


@pytest.mark.parametrize("family", SCORE_FAMILIES)
def test_multi_gold_uses_the_best_scoring_one(family):
    best = nonconformity(family, POOL, [1])
    assert nonconformity(family, POOL, [4, 1, 3]) == best
    assert nonconformity(family, POOL, (3, 1)) == best
    assert nonconformity(family, POOL, [1, 1]) == best
    # and that is the minimum over the golds taken one at a time
    assert best == min(nonconformity(family, POOL, [g]) for g in (4, 1, 3))


@pytest.mark.parametrize("family", SCORE_FAMILIES)
def test_gold_position_outside_pool_raises(family):
    with pytest.raises(ConformalError, match="outside"):
        nonconformity(family, POOL, [5])
    with pytest.raises(ConformalError):
        nonconformity(family, POOL, [-1])


def test_unknown_family_raises():
    for fn in (lambda: nonconformity("cosine", POOL, [0]), lambda: keep_mask("auto", POOL, 0.1)):
        with pytest.raises(ConformalError, match="Unknown score family"):
            fn()


def test_unsorted_or_nan_pool_raises():
    with pytest.raises(ConformalError, match="sorted"):
        nonconformity("similarity", [0.1, 0.9], [0])
    with pytest.raises(ConformalError, match="sorted"):
        keep_mask("relative", [0.1, 0.9], 0.5)
    with pytest.raises(ConformalError, match="NaN"):
        keep_mask("similarity", [0.9, float("nan")], 0.5)


def test_keep_mask_similarity_includes_ties():
    # keep s >= -q; q = -0.8 keeps both tied 0.8s
    assert keep_mask("similarity", POOL, -0.8).tolist() == [True, True, True, False, False]
    assert keep_mask("similarity", POOL, -0.85).tolist() == [True, False, False, False, False]
    assert keep_mask("similarity", POOL, -1.0).tolist() == [False] * 5
    assert keep_mask("similarity", POOL, 0.0).tolist() == [True] * 5


def test_keep_mask_rank_keeps_top_floor_q():
    assert keep_mask("rank", POOL, 2.0).tolist() == [True, True, False, False, False]
    assert keep_mask("rank", POOL, 2.7).tolist() == [True, True, False, False, False]
    assert keep_mask("rank", POOL, 0.0).tolist() == [False] * 5
    assert keep_mask("rank", POOL, 99.0).tolist() == [True] * 5
    assert set_size("rank", POOL, 3.0) == 3


def test_keep_mask_relative_adapts_to_the_top_score():
    assert keep_mask("relative", POOL, 0.1).tolist() == [True, True, True, False, False]  # ties at 0.8 kept
    assert keep_mask("relative", POOL, 0.0).tolist() == [True, False, False, False, False]
    # the same q keeps a different number on a pool with another top score
    assert set_size("relative", [0.5, 0.45, 0.42, 0.1], 0.1) == 3
    assert set_size("relative", [0.9, 0.45, 0.42, 0.1], 0.1) == 1
    assert keep_mask("relative", [], 0.1).tolist() == []


@pytest.mark.parametrize("family", SCORE_FAMILIES)
def test_inf_threshold_keeps_everything(family):
    assert keep_mask(family, POOL, INF).all()
    assert set_size(family, POOL, INF) == len(POOL)
    assert keep_mask(family, [], INF).tolist() == []


@pytest.mark.parametrize("family", SCORE_FAMILIES)
def test_candidate_nonconformity_is_nonconformity_of_each_candidate(family):
    cand = candidate_nonconformity(family, POOL)
    assert cand.tolist() == pytest.approx([nonconformity(family, POOL, [i]) for i in range(len(POOL))], abs=0)


def test_set_size_docstring_and_keep_mask_validate_flag():
    assert set_size("rank", [0.9, 0.8, 0.5], 2.0) == 2
    # validate=False skips the sortedness check (documented fast path), result unchanged on sorted input
    assert keep_mask("relative", POOL, 0.1, validate=False).tolist() == keep_mask("relative", POOL, 0.1).tolist()


# --- the consistency property ----------------------------------------------------------------------

pool_scores = st.lists(
    st.one_of(st.floats(-50, 50, allow_nan=False), st.sampled_from([0.0, 0.5, 1.0, 0.1, 0.3])),
    min_size=1,
    max_size=30,
).map(lambda xs: sorted(xs, reverse=True))


@st.composite
def pool_and_threshold(draw):
    scores = draw(pool_scores)
    family = draw(st.sampled_from(SCORE_FAMILIES))
    n = len(scores)
    golds = draw(st.lists(st.integers(0, n - 1), max_size=3))
    cand = candidate_nonconformity(family, scores)
    # thresholds at, just above and just below a candidate's own value, plus arbitrary ones
    anchor = float(draw(st.sampled_from(cand.tolist())))
    q = draw(
        st.one_of(
            st.just(anchor),
            st.just(float(np.nextafter(anchor, INF))),
            st.just(float(np.nextafter(anchor, -INF))),
            st.floats(-60, 120, allow_nan=False),
            st.just(INF),
        )
    )
    return family, scores, golds, q


@settings(deadline=None, max_examples=200)
@given(pool_and_threshold())
def test_property_gold_kept_iff_nonconformity_le_threshold(args):
    family, scores, golds, q = args
    mask = keep_mask(family, scores, q)
    r = nonconformity(family, scores, golds)
    gold_kept = any(mask[g] for g in golds)
    if golds:
        assert gold_kept == (r <= q), (family, scores, golds, q, r)
    else:
        # a miss scores +inf: only an infinite threshold "covers" it, and no pool filter can return it
        assert r == INF
        assert not gold_kept
    # per candidate: kept iff its own nonconformity <= q
    np.testing.assert_array_equal(mask, candidate_nonconformity(family, scores) <= q)


@settings(deadline=None, max_examples=100)
@given(pool_and_threshold())
def test_property_kept_set_is_a_prefix_and_monotone_in_q(args):
    family, scores, _golds, q = args
    mask = keep_mask(family, scores, q)
    k = int(mask.sum())
    assert mask.tolist() == [True] * k + [False] * (len(scores) - k)  # always the top-k of the pool
    assert set_size(family, scores, q) == k
    if math.isfinite(q):
        assert set_size(family, scores, q + 1.0) >= k
        assert set_size(family, scores, q - 1.0) <= k
