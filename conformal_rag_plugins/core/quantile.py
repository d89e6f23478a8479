"""Where every threshold is computed: the split-conformal and PAC quantiles.

The split-conformal threshold is the ``ceil((n+1)(1-alpha))``-th smallest
nonconformity score. Keeping every candidate whose score is ``<=`` that value
(ties count as covered) gives marginal coverage of at least ``1-alpha`` for an
exchangeable test point. When the rank exceeds ``n`` the threshold is ``+inf``
(include everything), which this module announces with a warning, or refuses
with ``strict=True``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np

from .binomial import binom_cdf_last_at_most
from .errors import CalibrationError, InfiniteThresholdWarning
from .validation import check_alpha, check_scores

__all__ = [
    "conformal_quantile",
    "conformal_rank",
    "coverage_bounds",
    "min_calibration_size",
    "pac_quantile",
    "pac_rank",
]


def conformal_rank(n: int, alpha: float) -> int:
    """Return the finite-sample rank ``ceil((n+1)(1-alpha))`` in exact arithmetic.

    Examples
    --------
    >>> conformal_rank(100, 0.1)
    91
    """
    alpha = check_alpha(alpha)
    # Exact rational arithmetic avoids 0.9 * 101 = 90.9000...01 style surprises.
    from fractions import Fraction

    return math.ceil((n + 1) * (1 - Fraction(str(alpha))))


def min_calibration_size(alpha: float) -> int:
    """Smallest n for which the split-conformal threshold is finite.

    Examples
    --------
    >>> min_calibration_size(0.1)
    9
    """
    alpha = check_alpha(alpha)
    from fractions import Fraction

    # ceil((n+1)(1-alpha)) <= n  <=>  (n+1)(1-alpha) <= n  <=>  n >= 1/alpha - 1 (exact, no O(1/alpha) loop)
    return max(1, math.ceil(1 / Fraction(str(alpha))) - 1)


def _score_array(scores: Iterable[float]) -> np.ndarray:
    """:func:`check_scores` with one pass and no copy for a float array (the common, valid case).

    A NaN or ``-inf`` anywhere makes the minimum NaN or ``-inf``; only then (or for non-arrays,
    empty input) does :func:`check_scores` run, for its exact error.
    """
    if isinstance(scores, np.ndarray) and scores.size:
        arr = np.asarray(scores, dtype=float).ravel()
        low = arr.min()
        if not (np.isnan(low) or low == -math.inf):
            return arr
    return check_scores(scores)


def _infinite(message: str, strict: bool) -> float:
    if strict:
        raise CalibrationError(message)
    warnings.warn(message, InfiniteThresholdWarning, stacklevel=3)
    return math.inf


def conformal_quantile(scores: Iterable[float], alpha: float, *, strict: bool = False) -> float:
    """Split-conformal threshold on nonconformity scores (lower conforms better).

    Parameters
    ----------
    scores : iterable of float
        Calibration nonconformity scores. ``+inf`` marks a miss and is kept.
    alpha : float
        Target miscoverage in (0, 1).
    strict : bool, default False
        Raise :class:`CalibrationError` instead of returning ``+inf`` when the
        rank exceeds ``n`` or lands on a miss.

    Returns
    -------
    float
        The ``ceil((n+1)(1-alpha))``-th smallest score, or ``inf``.

    Examples
    --------
    >>> conformal_quantile([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], 0.1)
    0.9
    """
    arr = _score_array(scores)
    n = arr.size
    k = conformal_rank(n, alpha)
    if k > n:
        return _infinite(
            f"Rank ceil((n+1)(1-alpha)) = {k} exceeds n = {n} calibration points at alpha={alpha}: "
            f"the threshold is +inf and every candidate is included. Use at least "
            f"{min_calibration_size(alpha)} calibration examples or a larger alpha.",
            strict,
        )
    q = float(np.partition(arr, k - 1)[k - 1])
    if math.isinf(q):
        misses = int(np.isposinf(arr).sum())
        return _infinite(
            f"{misses} of {n} calibration examples are misses (+inf), but at most n - ceil((n+1)(1-alpha)) "
            f"= {n - k} (fewer than floor(alpha(n+1)) = {n - k + 1}) can be at alpha={alpha}: the threshold "
            "is +inf and every candidate is included. Enlarge the candidate pool or raise alpha.",
            strict,
        )
    return q


def pac_rank(n: int, epsilon: float, delta: float) -> int | None:
    """Smallest k with ``BinomCDF(n-k; n, epsilon) <= delta``, or ``None``.

    Examples
    --------
    >>> pac_rank(100, 0.1, 0.1)
    95
    """
    epsilon = check_alpha(epsilon, "epsilon")
    delta = check_alpha(delta, "delta")
    if n < 1:
        return None
    # smallest k <=> largest x = n - k (k >= 1 so x <= n - 1) with BinomCDF(x; n, epsilon) <= delta,
    # exactly as the full table binom_cdf_all(n, epsilon) says, from O(sqrt(n)) terms
    x = binom_cdf_last_at_most(n, epsilon, delta, x_max=n - 1)
    return None if x < 0 else n - x


def pac_quantile(scores: Iterable[float], epsilon: float, delta: float, *, strict: bool = False) -> float:
    """PAC (epsilon, delta) threshold: miscoverage <= epsilon with probability >= 1-delta.

    Returns the k-th smallest score for the smallest k with
    ``BinomCDF(n-k; n, epsilon) <= delta`` over the calibration draw, or ``inf``
    when no such k exists.

    Examples
    --------
    >>> round(pac_quantile([i / 100 for i in range(1, 101)], 0.1, 0.1), 2)
    0.95
    """
    arr = _score_array(scores)
    n = arr.size
    k = pac_rank(n, epsilon, delta)
    if k is None:
        return _infinite(
            f"No rank k <= n = {n} satisfies BinomCDF(n-k; n, {epsilon}) <= {delta}: the PAC "
            "threshold is +inf and every candidate is included. Use more calibration examples.",
            strict,
        )
    q = float(np.partition(arr, k - 1)[k - 1])
    if math.isinf(q):
        return _infinite(
            f"The PAC rank {k} of {n} lands on a miss (+inf): every candidate is included.",
            strict,
        )
    return q


def coverage_bounds(n: int, alpha: float) -> tuple[float, float]:
    """Marginal coverage bounds ``(1-alpha, 1-alpha+1/(n+1))`` (upper one without ties).

    When the rank ``ceil((n+1)(1-alpha))`` exceeds ``n`` the threshold is ``+inf``
    and the set is the whole candidate pool: coverage is then only the chance that
    the gold is in the pool, which calibration does not bound, so the lower bound
    is 0 (and the upper 1), never ``(1, 1)``.

    Examples
    --------
    >>> coverage_bounds(99, 0.1)
    (0.9, 0.91)
    >>> coverage_bounds(5, 0.1)
    (0.0, 1.0)
    """
    k = conformal_rank(n, alpha)
    if k > n:
        return (0.0, 1.0)
    return (1.0 - alpha, min(1.0, 1.0 - alpha + 1.0 / (n + 1)))
