"""Unit tests for RetrievalConformalizer on synthetic candidate pools (no models)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import (
    CalibrationError,
    ConformalError,
    InfiniteThresholdWarning,
    NotFittedError,
)
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile, pac_quantile
from conformal_rag_plugins.datasets.examples import split_examples
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("unit", "ListStore", "cosine", "toy-model", 8, "cosine")
POOL = 20


def relative_pools(n: int, seed: int = 0) -> list[PoolObservation]:
    """Pools of 20 descending scores with the gold at a random position (sometimes missing)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        scores = np.sort(rng.uniform(0, 1, POOL))[::-1].copy()
        gold = () if rng.random() < 0.05 else (int(rng.integers(0, 6)),)
        out.append(PoolObservation(scores, gold))
    return out


def rank_favouring_pool(i: int) -> PoolObservation:
    """Gold always first; the top score varies a lot across queries (similarity sets are big)."""
    top = 0.3 + 0.65 * ((i * 37) % 100) / 100
    return PoolObservation(top - 0.01 * np.arange(POOL), (0,))


def similarity_favouring_pool(i: int) -> PoolObservation:
    """Gold always scores 0.8, at position p in 0..4, with dense scores just below it."""
    p = i % 5
    above = [0.8 + 0.03 * (p - j) for j in range(p)]
    below = [0.79 - 0.01 * j for j in range(POOL - p - 1)]
    return PoolObservation(np.array([*above, 0.8, *below]), (p,))


def miss_pool(_: int) -> PoolObservation:
    return PoolObservation(np.linspace(0.9, 0.1, POOL), ())


def fit(obs, **kw) -> RetrievalCalibration:
    conf = kw.pop("confidence_level", 0.9)
    return RetrievalConformalizer(conf, **kw).conformalize_pools(obs, fingerprint=FP, pool_size=POOL).calibration_


# --- fixed family ------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["relative", "similarity", "rank"])
def test_split_threshold_is_the_conformal_quantile_of_all_points(family):
    obs = relative_pools(200)
    cal = fit(obs, score=family)
    scores = [o.score(family) for o in obs]
    assert cal.threshold_ == conformal_quantile(scores, 0.1)
    assert cal.score_family_ == family
    assert cal.n_calibration_ == 200
    assert cal.n_misses_ == sum(math.isinf(s) for s in scores) > 0  # misses are kept and counted
    assert cal.scores_ == tuple(scores)
    assert cal.alpha_ == 0.1  # 1 - 0.9 rounded, not 0.09999999999999998
    assert cal.method_ == "split"
    assert cal.delta_ is None
    assert cal.pool_size_ == POOL
    assert cal.fingerprint_ == FP
    assert cal.selection_ == {}


def test_pac_threshold():
    obs = relative_pools(300, seed=1)
    cal = fit(obs, method="pac", delta=0.05)
    scores = [o.score("relative") for o in obs]
    assert cal.threshold_ == pac_quantile(scores, 0.1, 0.05)
    assert cal.threshold_ >= conformal_quantile(scores, 0.1)
    assert cal.method_ == "pac"
    assert cal.delta_ == 0.05


def test_threshold_shortcut_and_not_fitted():
    est = RetrievalConformalizer(0.9)
    with pytest.raises(NotFittedError, match="conformalize"):
        _ = est.threshold_
    with pytest.raises(NotFittedError):
        _ = est.calibration
    with pytest.raises(AttributeError):  # NotFittedError is an AttributeError too (hasattr works)
        _ = est.calibration
    assert not hasattr(est, "calibration_")
    returned = est.conformalize_pools(relative_pools(50), fingerprint=FP, pool_size=POOL)
    assert returned is est
    assert est.threshold_ == est.calibration_.threshold_ == est.calibration.threshold_


# --- parameter and data validation -------------------------------------------------------------------


def test_too_few_points_names_the_minimum():
    with pytest.raises(CalibrationError, match="at least 9"):
        fit(relative_pools(8))
    with pytest.raises(CalibrationError, match="at least 19"):
        fit(relative_pools(18), confidence_level=0.95)
    # n = 9 passes the plain rank ceil(10 * 0.9) = 9 but is too few for a threshold that holds given its
    # flag when the pool may miss (flagged_rank): +inf, naming the 18 needed; n = 18 gives rank 18, the largest
    nine = [similarity_favouring_pool(i) for i in range(9)]
    with pytest.warns(InfiniteThresholdWarning, match="at least 18"):
        assert fit(nine, score="rank").threshold_ == math.inf
    eighteen = [similarity_favouring_pool(i) for i in range(18)]
    assert fit(eighteen, score="rank").threshold_ == max(o.score("rank") for o in eighteen)


def test_too_few_points_after_the_optimisation_split():
    # 12 points, 30% for the optimisation split -> 8 left, fewer than 9
    with pytest.raises(CalibrationError, match="at least 9"):
        fit(relative_pools(12), score="auto")


@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_confidence_level_outside_unit_interval(level):
    with pytest.raises(ConformalError, match="confidence_level"):
        fit(relative_pools(50), confidence_level=level)


def test_pac_needs_delta():
    with pytest.raises(CalibrationError, match="delta"):
        fit(relative_pools(50), method="pac")
    with pytest.raises(ConformalError, match="delta"):
        fit(relative_pools(50), method="pac", delta=1.5)


@pytest.mark.parametrize(("kw", "match"), [({"method": "bayes"}, "method"), ({"score": "cosine"}, "score")])
def test_unknown_method_or_score(kw, match):
    with pytest.raises(CalibrationError, match=match):
        fit(relative_pools(50), **kw)


def test_empty_observations_raise():
    with pytest.raises(CalibrationError, match="No calibration examples"):
        fit([])


def test_nan_or_unsorted_scores_raise_at_observation_time():
    with pytest.raises(ConformalError, match="NaN"):
        PoolObservation(np.array([0.9, float("nan")]), (0,))
    with pytest.raises(ConformalError, match="sorted"):
        PoolObservation(np.array([0.1, 0.9]), (0,))


def test_all_misses_give_inf_with_warning_or_error():
    obs = [miss_pool(i) for i in range(30)]
    with pytest.warns(InfiniteThresholdWarning):
        cal = fit(obs)
    assert cal.is_infinite_
    assert cal.n_misses_ == 30
    with pytest.raises(CalibrationError):
        fit(obs, strict=True)


# --- auto: choose on an optimisation split, calibrate on the disjoint rest ---------------------------

N_AUTO = 100


def auto_parts(seed: int = 0) -> tuple[list[int], list[int]]:
    opt, rest = split_examples(list(range(N_AUTO)), (0.3, 0.7), seed=seed)
    return opt, rest


def build(opt_maker, cal_maker, seed: int = 0) -> list[PoolObservation]:
    opt, _ = auto_parts(seed)
    opt_set = set(opt)
    return [opt_maker(i) if i in opt_set else cal_maker(i) for i in range(N_AUTO)]


def test_auto_counts_and_selection_record():
    cal = fit(build(similarity_favouring_pool, similarity_favouring_pool), score="auto", random_state=0)
    assert cal.selection_["rule"] == "auto"
    assert cal.selection_["seed"] == 0
    assert cal.selection_["n_optimisation"] == 30
    assert cal.n_calibration_ == 70
    assert cal.n_calibration_ + cal.selection_["n_optimisation"] == N_AUTO
    assert cal.selection_["chosen"] == cal.score_family_


def test_auto_choice_follows_only_the_optimisation_part():
    _, rest = auto_parts()
    # identical calibration part (similarity-favouring); only the optimisation part differs
    a = fit(build(rank_favouring_pool, similarity_favouring_pool), score="auto")
    b = fit(build(similarity_favouring_pool, similarity_favouring_pool), score="auto")
    assert a.score_family_ == "rank"  # chosen from the optimisation part although it is bad on the rest
    assert b.score_family_ == "similarity"
    # each threshold is the conformal quantile of the calibration part alone, in the chosen family
    cal_part = [similarity_favouring_pool(i) for i in rest]
    assert a.threshold_ == conformal_quantile([o.score("rank") for o in cal_part], 0.1)
    assert b.threshold_ == conformal_quantile([o.score("similarity") for o in cal_part], 0.1)
    assert b.threshold_ == -0.8
    assert sorted(a.scores_) == sorted(o.score("rank") for o in cal_part)
    assert sorted(b.scores_) == sorted(o.score("similarity") for o in cal_part)


def test_auto_threshold_ignores_the_optimisation_part():
    # the optimisation part is all misses: if any of it leaked into the calibration, 30 misses out of
    # 100 would force an infinite threshold
    obs = build(miss_pool, similarity_favouring_pool)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InfiniteThresholdWarning)
        cal = fit(obs, score="auto")
    assert cal.n_misses_ == 0
    assert math.isfinite(cal.threshold_)
    # all families tie (everything is kept) on all-miss optimisation data: the first family wins
    assert cal.score_family_ == "similarity"
    assert cal.threshold_ == -0.8


def test_auto_depends_on_random_state_through_the_split():
    obs = relative_pools(120, seed=4)
    c0 = fit(obs, score="auto", random_state=0)
    c0_again = fit(obs, score="auto", random_state=0)
    c1 = fit(obs, score="auto", random_state=1)
    assert (c0.threshold_, c0.score_family_, c0.scores_) == (
        c0_again.threshold_,
        c0_again.score_family_,
        c0_again.scores_,
    )
    assert c1.selection_["seed"] == 1
    assert c0.scores_ != c1.scores_  # another split of the same data


@pytest.mark.parametrize("strict", [False, True])
def test_too_few_points_raise_whatever_strict_says(strict):
    """docs/guarantees.md and the ``strict`` docstring say so: n < min_calibration_size(alpha) always raises."""
    obs = [miss_pool(i) for i in range(8)]  # alpha=0.1 needs n >= 9 even without a miss
    with pytest.raises(CalibrationError, match=r"too few for alpha=0\.1.*at least 9"):
        fit(obs, strict=strict)
