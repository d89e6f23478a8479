"""Unit tests for score fusion of two candidate lists (core/fusion.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.core.fusion import DEFAULT_DENSE_WEIGHT, fuse_scores, normalise


def test_normalise_minmax():
    np.testing.assert_allclose(normalise(np.array([1.0, 3.0, 2.0]), "minmax"), [0.0, 1.0, 0.5])
    # constant scores: all ones (no division by zero)
    np.testing.assert_array_equal(normalise(np.array([4.0, 4.0]), "minmax"), [1.0, 1.0])


def test_normalise_zscore():
    out = normalise(np.array([1.0, 2.0, 3.0, 6.0]), "zscore")
    assert out.mean() == pytest.approx(0.0, abs=1e-12)
    assert out.std() == pytest.approx(1.0)
    np.testing.assert_allclose(out, (np.array([1, 2, 3, 6]) - 3.0) / np.std([1, 2, 3, 6]))
    np.testing.assert_array_equal(normalise(np.array([5.0, 5.0, 5.0]), "zscore"), [0.0, 0.0, 0.0])


def test_normalise_empty_and_unknown_method():
    assert normalise(np.array([]), "zscore").size == 0
    with pytest.raises(ConformalError, match="Unknown fusion method"):
        normalise(np.array([1.0, 2.0]), "rank")


@pytest.mark.parametrize("method", ["zscore", "minmax"])
def test_normalise_is_affine_invariant(method):
    x = np.array([0.3, 0.9, 0.1, 0.5])
    np.testing.assert_allclose(normalise(x, method), normalise(7.0 * x - 2.0, method), atol=1e-12)


def test_fuse_minmax_hand_computed():
    first = {"a": 0.9, "b": 0.1}  # -> a 1, b 0
    second = {"b": 5.0, "c": 1.0}  # -> b 1, c 0
    fused = fuse_scores(first, second, weight=0.5, method="minmax")
    # a: 0.5*1 + 0.5*floor(second)=0 ; b: 0.5*0 + 0.5*1 ; c: 0.5*floor(first)=0 + 0
    assert fused == [("a", 0.5), ("b", 0.5), ("c", 0.0)]  # the a/b tie is broken by id


def test_fuse_weight_extremes_reduce_to_one_list():
    first = {"a": 3.0, "b": 2.0, "c": 1.0}
    second = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert [cid for cid, _ in fuse_scores(first, second, weight=1.0)] == ["a", "b", "c"]
    assert [cid for cid, _ in fuse_scores(first, second, weight=0.0)] == ["c", "b", "a"]


def test_fuse_weighted_zscore_values():
    first = {"a": 1.0, "b": 2.0, "c": 3.0}
    second = {"a": 10.0, "b": 30.0, "c": 20.0}
    w = 0.7
    fused = dict(fuse_scores(first, second, weight=w, method="zscore"))
    z1 = normalise(np.array([1.0, 2.0, 3.0]), "zscore")
    z2 = normalise(np.array([10.0, 30.0, 20.0]), "zscore")
    for i, cid in enumerate("abc"):
        assert fused[cid] == pytest.approx(w * z1[i] + (1 - w) * z2[i])


def test_fuse_missing_candidate_gets_that_lists_lowest_normalised_score():
    first = {"a": 1.0, "b": 2.0, "c": 3.0}
    second = {"c": 10.0, "d": 0.0}
    fused = dict(fuse_scores(first, second, weight=0.5, method="zscore"))
    z1 = dict(zip("abc", normalise(np.array([1.0, 2.0, 3.0]), "zscore"), strict=True))
    z2 = dict(zip("cd", normalise(np.array([10.0, 0.0]), "zscore"), strict=True))
    assert fused["a"] == pytest.approx(0.5 * z1["a"] + 0.5 * min(z2.values()))
    assert fused["d"] == pytest.approx(0.5 * min(z1.values()) + 0.5 * z2["d"])
    assert set(fused) == {"a", "b", "c", "d"}


def test_fuse_output_sorted_best_first_and_ties_broken_by_id():
    first = {"y": 0.2, "x": 0.2, "z": 0.9, "w": 0.0}
    second = {"y": 1.0, "x": 1.0, "z": 0.1, "w": 0.0}
    out = fuse_scores(first, second, method="minmax")
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True)
    # x and y have identical inputs, hence identical fused scores: x comes first by id
    assert [cid for cid, _ in out] == ["x", "y", "z", "w"]
    assert out[0][1] == out[1][1]
    # the ranking does not depend on the order of the input dicts
    rev = fuse_scores(dict(reversed(list(first.items()))), dict(reversed(list(second.items()))), method="minmax")
    assert [cid for cid, _ in rev] == [cid for cid, _ in out]
    assert [s for _, s in rev] == pytest.approx(scores)


def test_fuse_empty_inputs():
    assert fuse_scores({}, {}) == []
    assert [cid for cid, _ in fuse_scores({"a": 1.0, "b": 0.0}, {})] == ["a", "b"]


@pytest.mark.parametrize("weight", [-0.1, 1.1])
def test_fuse_bad_weight(weight):
    with pytest.raises(ConformalError, match="weight"):
        fuse_scores({"a": 1.0}, {"a": 1.0}, weight=weight)


def test_fuse_bad_method():
    with pytest.raises(ConformalError, match="Unknown fusion method"):
        fuse_scores({"a": 1.0, "b": 2.0}, {"a": 1.0}, method="softmax")


def test_default_weight_is_equal():
    assert DEFAULT_DENSE_WEIGHT == 0.5


@settings(deadline=None, max_examples=100)
@given(
    first=st.dictionaries(st.sampled_from("abcdefgh"), st.floats(-10, 10, allow_nan=False), max_size=8),
    second=st.dictionaries(st.sampled_from("defghijk"), st.floats(-10, 10, allow_nan=False), max_size=8),
    weight=st.floats(0, 1),
    method=st.sampled_from(["zscore", "minmax"]),
)
def test_property_fusion_covers_the_union_and_is_sorted(first, second, weight, method):
    out = fuse_scores(first, second, weight=weight, method=method)
    ids = [cid for cid, _ in out]
    assert sorted(ids) == sorted(set(first) | set(second))
    keys = [(-s, cid) for cid, s in out]
    assert keys == sorted(keys)
    assert all(np.isfinite(s) for _, s in out)
