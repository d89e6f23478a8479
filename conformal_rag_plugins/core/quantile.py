"""Where every threshold is computed: the split-conformal and PAC quantiles.

The split-conformal threshold is the ``ceil((n+1)(1-alpha))``-th smallest score; keeping scores
``<=`` it (ties covered) gives marginal coverage ``>= 1-alpha``. A rank above ``n`` gives ``+inf``
(keep everything), with a warning, or an error with ``strict=True``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

from .binomial import binom_cdf_all, binom_cdf_last_at_most
from .errors import CalibrationError, InfiniteThresholdWarning
from .recall_risk import risk_curve
from .validation import check_alpha, check_scores


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
    """:func:`check_scores` in one pass, no copy, for a float array (a NaN/``-inf`` minimum falls back to it)."""
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
        Calibration nonconformity scores; ``+inf`` marks a miss and is kept.
    alpha : float
        Target miscoverage in (0, 1).
    strict : bool, default False
        Raise :class:`CalibrationError` instead of returning ``+inf`` when the rank exceeds ``n``
        or lands on a miss.

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

    Parameters
    ----------
    scores : iterable of float
        Calibration nonconformity scores; ``+inf`` marks a miss and is kept.
    epsilon, delta : float
        Miscoverage bound and the probability, over the calibration draw, that it fails.
    strict : bool, default False
        Raise :class:`CalibrationError` instead of returning ``+inf`` when no rank qualifies or the
        rank lands on a miss.

    Returns
    -------
    float
        The k-th smallest score for the smallest k with ``BinomCDF(n-k; n, epsilon) <= delta``,
        or ``inf`` when no such k exists.

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

    When the rank exceeds ``n`` the set is the whole pool, whose coverage calibration does not
    bound: ``(0, 1)``, never ``(1, 1)``.

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


#: Slack on summed losses, far below any loss step 1/m (floating sums of 1/m_i are not exact).
_LOSS_TOL = 1e-9


def crc_threshold(gold_scores: Sequence[Sequence[float]], alpha: float, *, strict: bool = False) -> float:
    """Conformal risk control of the miss rate ``1 - recall`` (Angelopoulos et al., 2022).

    ``lam = inf{lam : n/(n+1) R_n(lam) + 1/(n+1) <= alpha}``, ``R_n`` the mean miss rate of the gold
    chunks (``+inf`` outside the pool; loss bounded by 1), gives ``E[1 - recall] <= alpha``. With one
    gold chunk per question this is exactly :func:`conformal_quantile`.

    Examples
    --------
    >>> crc_threshold([[i / 10] for i in range(1, 10)], 0.1)  # one gold each: the split quantile
    0.9
    >>> crc_threshold([[0.1, 0.5]] * 19, 0.1)  # half of each question's gold at 0.1 is not enough
    0.5
    """
    alpha = check_alpha(alpha)
    lambdas, total, n = risk_curve(gold_scores)
    # n/(n+1) R + 1/(n+1) <= alpha  <=>  n R <= alpha (n+1) - 1, with alpha (n+1) exact
    from fractions import Fraction

    bound = float(Fraction(str(alpha)) * (n + 1) - 1)
    ok = np.flatnonzero(total <= bound + _LOSS_TOL)
    if ok.size:
        return float(lambdas[ok[0]])
    lowest = ((float(total[-1]) if total.size else n) + 1) / (n + 1)
    return _infinite(
        f"No finite threshold brings the corrected mean miss rate (n R + 1)/(n+1) of {n} calibration questions "
        f"to alpha={alpha} (at the largest it is {lowest:.4g}): "
        "the threshold is +inf and every candidate is included, so recall then rests on the pool alone. Use at "
        f"least {min_calibration_size(alpha)} calibration questions, a larger pool or a larger alpha.",
        strict,
    )


def hoeffding_bentkus_pvalue(risk_hat: float, n: int, alpha: float) -> float:
    """Hoeffding-Bentkus p-value of ``H: R > alpha`` for a loss in [0, 1] with mean ``risk_hat`` over ``n``.

    ``min(exp(-n h(min(risk_hat, alpha), alpha)), e * P(Binomial(n, alpha) <= ceil(n risk_hat)))`` with
    ``h(a, b) = a log(a/b) + (1-a) log((1-a)/(1-b))`` (Bates et al., 2021; Angelopoulos et al., 2021).

    Examples
    --------
    >>> round(hoeffding_bentkus_pvalue(0.0, 50, 0.1), 5)  # (1 - alpha)^n
    0.00515
    >>> hoeffding_bentkus_pvalue(0.2, 50, 0.1)
    1.0
    """
    alpha = check_alpha(alpha)
    return float(_hb_pvalues(np.asarray([risk_hat], dtype=float), n, alpha)[0])


def _hb_pvalues(risk_hat: np.ndarray, n: int, alpha: float) -> np.ndarray:
    a = np.clip(np.minimum(risk_hat, alpha), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(a > 0, a * np.log(a / alpha), 0.0) + (1 - a) * np.log((1 - a) / (1 - alpha))
    hoeffding = np.exp(-n * h)
    k = np.ceil(np.round(n * risk_hat, 9)).astype(int)  # n * risk_hat is a float sum of 1/m terms
    cdf = binom_cdf_all(n, alpha)
    bentkus = math.e * np.where(k >= n, 1.0, cdf[np.clip(k, 0, n)])
    return np.minimum(np.minimum(hoeffding, bentkus), 1.0)


def ltt_threshold(gold_scores: Sequence[Sequence[float]], alpha: float, delta: float, *, strict: bool = False) -> float:
    """Learn-then-Test threshold: ``P(E[1 - recall | calibration] <= alpha) >= 1 - delta``.

    Fixed-sequence testing of ``H_lam: R(lam) > alpha`` (Hoeffding-Bentkus p-values) from the largest
    ``lam`` down at level ``delta``; the smallest rejected ``lam`` is returned (Angelopoulos et al.,
    2021). The p-value only changes at the gold nonconformities, so testing those is the same test.

    Examples
    --------
    >>> ltt_threshold([[i / 100] for i in range(1, 201)], 0.1, 0.1)  # the exact-binomial PAC rank gives 1.86
    1.88
    """
    alpha = check_alpha(alpha)
    delta = check_alpha(delta, "delta")
    lambdas, total, n = risk_curve(gold_scores)
    pvalues = _hb_pvalues(total / n, n, alpha)
    rejected = None
    for j in range(lambdas.size - 1, -1, -1):
        if pvalues[j] > delta:
            break
        rejected = j
    if rejected is not None:
        return float(lambdas[rejected])
    need = math.ceil(math.log(delta) / math.log1p(-alpha))
    return _infinite(
        f"Learn-then-Test rejects no finite threshold for {n} calibration questions at alpha={alpha}, "
        f"delta={delta}: the threshold is +inf and every candidate is included, so recall then rests on the pool "
        f"alone. Even with no loss at all it needs n >= {need}; use more questions, a larger pool or a larger alpha.",
        strict,
    )
