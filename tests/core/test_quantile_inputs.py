"""The one-pass score check of the quantiles accepts and refuses exactly what ``check_scores`` does.

No timing here: ``benchmarks/overhead.py`` measures the quantiles against ``np.partition``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationError, InfiniteThresholdWarning
from conformal_rag_plugins.core.quantile import conformal_quantile, conformal_rank, pac_quantile, pac_rank
from conformal_rag_plugins.core.validation import check_scores

# The plain rank (a pool that cannot miss); the rule for pools that can is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

INF, NAN = math.inf, math.nan


def _reference_conformal(scores, alpha):
    arr = np.sort(check_scores(scores))
    k = conformal_rank(arr.size, alpha)
    return math.inf if k > arr.size else float(arr[k - 1])


def _reference_pac(scores, eps, delta):
    arr = np.sort(check_scores(scores))
    k = pac_rank(arr.size, eps, delta)
    return math.inf if k is None else float(arr[k - 1])


def _error(fn, *args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            return ("ok", fn(*args))
    except CalibrationError as exc:
        return ("error", str(exc))


INPUTS = [
    np.linspace(0.0, 1.0, 101),
    np.linspace(0.0, 1.0, 101)[::-1].copy(),
    np.arange(200, dtype=np.int64),
    np.linspace(0.0, 1.0, 300, dtype=np.float32),
    np.linspace(0.0, 1.0, 120).reshape(12, 10),
    np.r_[np.linspace(0, 1, 200), [INF] * 5],
    np.r_[np.linspace(0, 1, 200), [NAN]],
    np.r_[[NAN, NAN], np.linspace(0, 1, 200)],
    np.r_[np.linspace(0, 1, 200), [-INF]],
    np.r_[np.linspace(0, 1, 200), [NAN, -INF]],
    np.array([]),
    np.array([0.5]),
    [0.1 * i for i in range(150)],
    tuple(0.1 * i for i in range(150)),
]


@pytest.mark.parametrize("scores", INPUTS, ids=range(len(INPUTS)))
def test_quantiles_accept_and_refuse_like_check_scores(scores):
    for alpha in (0.05, 0.1, 0.5):
        assert _error(conformal_quantile, scores, alpha) == _error(_reference_conformal, scores, alpha)
        assert _error(pac_quantile, scores, alpha, 0.1) == _error(_reference_pac, scores, alpha, 0.1)


def test_generator_input_still_works():
    assert conformal_quantile((i / 10 for i in range(1, 10)), 0.1) == 0.9


def test_input_array_is_not_modified():
    scores = np.random.default_rng(0).random(1000)
    before = scores.copy()
    conformal_quantile(scores, 0.1)
    pac_quantile(scores, 0.1, 0.1)
    assert np.array_equal(scores, before)


def test_strict_and_warning_behaviour_kept():
    few = np.linspace(0.0, 1.0, 5)
    with pytest.warns(InfiniteThresholdWarning):
        assert conformal_quantile(few, 0.1) == math.inf
    with pytest.raises(CalibrationError):
        conformal_quantile(few, 0.1, strict=True)
    misses = np.r_[np.linspace(0, 1, 50), [INF] * 20]
    with pytest.warns(InfiniteThresholdWarning, match="20 of 70"):
        assert conformal_quantile(misses, 0.1) == math.inf
    with pytest.raises(CalibrationError):
        pac_quantile(misses, 0.1, 0.1, strict=True)
