"""Baseline thresholds to compare against: CONFLARE's published rule and fixed top-k."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from .validation import check_alpha, check_scores


def conflare_threshold(distances: Iterable[float], error_rate: float) -> float:
    """CONFLARE's rule: ``np.percentile(distances, 100(1-error_rate))`` (linear interpolation).

    No (n+1) correction, so slightly anti-conservative: a baseline only. A miss (+inf) propagates.

    Examples
    --------
    >>> conflare_threshold([0.1, 0.2, 0.3, 0.4], 0.5)
    0.25
    """
    error_rate = check_alpha(error_rate, "error_rate")
    arr = check_scores(distances)
    with np.errstate(invalid="ignore"):
        q = float(np.percentile(arr, 100.0 - 100.0 * error_rate))
    if math.isnan(q):
        # numpy's interpolation towards a miss computes inf - inf; the limit is +inf, or the lower
        # neighbour itself when the position is an exact order statistic.
        d = np.sort(arr)
        h = (1.0 - error_rate) * (arr.size - 1)
        lo = math.floor(h)
        q = float(d[lo]) if h == lo else math.inf
    return q


def conflare_keep(distance: float, threshold: float) -> bool:
    """CONFLARE keeps a chunk iff its distance is strictly below the threshold.

    Examples
    --------
    >>> conflare_keep(0.25, 0.25)
    False
    """
    return bool(distance < threshold)
