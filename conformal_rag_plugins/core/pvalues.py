"""Conformal p-values."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .validation import check_scores


def conformal_pvalues(calibration_scores: Iterable[float], test_scores: Iterable[float]) -> np.ndarray:
    """Conformal p-values ``(1 + #{i : r_i >= r}) / (n + 1)`` for each test score.

    Kept at level alpha iff ``> alpha``, matching :func:`conformal_quantile` (ties covered).

    Examples
    --------
    >>> conformal_pvalues([0.1, 0.2, 0.3], [0.2, 0.5]).tolist()
    [0.75, 0.25]
    """
    cal = np.sort(check_scores(calibration_scores))
    test = np.asarray(list(test_scores) if not isinstance(test_scores, np.ndarray) else test_scores, dtype=float)
    if np.isnan(test).any():
        raise ValueError("Test scores must not be NaN.")
    n = cal.size
    at_least = n - np.searchsorted(cal, test, side="left")
    return (1.0 + at_least) / (n + 1.0)


def conformal_pvalue(calibration_scores: Iterable[float], score: float) -> float:
    """Conformal p-value of one test score.

    Examples
    --------
    >>> conformal_pvalue([0.1, 0.2, 0.3], 0.25)
    0.5
    """
    return float(conformal_pvalues(calibration_scores, [score])[0])
