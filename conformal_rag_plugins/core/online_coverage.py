"""Labelled monitoring: an anytime-valid confidence sequence for coverage, and adaptive conformal inference.

**Confidence sequence.** The beta-binomial (Robbins) mixture of likelihood ratios
``M_t(c) = B(a + S_t, b + t - S_t) / B(a, b) / (c^S_t (1 - c)^(t - S_t))`` (``S_t`` covered) is a
non-negative martingale under coverage rate ``c``, so by Ville ``{c : M_t(c) < 1/delta}`` holds
``c`` at every ``t`` at once with probability ``>= 1 - delta`` (optional stopping is safe). It is an
interval (``-log M_t`` is convex), found by bisection.

**ACI** (Gibbs and Candès, 2021): ``alpha_{t+1} = alpha_t + gamma (alpha - err_t)``; whatever the
data, ``|mean(err) - alpha| <= (max(alpha_1, 1 - alpha_1) + gamma) / (gamma T)``. ``alpha_t <= 0``
gives ``+inf``, ``>= 1`` gives ``-inf``. A gold chunk outside the pool misses even at ``+inf``
(:func:`aci_miss`), which the bound assumes never happens: ``alpha_t`` then keeps falling and the
reported miss rate is the real one, above ``alpha``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

from .errors import ConformalError, InfiniteThresholdWarning
from .quantile import conformal_quantile


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def log_mixture_martingale(successes: int, n: int, c: float, prior: tuple[float, float] = (1.0, 1.0)) -> float:
    """``log M_n(c)`` of the beta-binomial mixture against the coverage rate ``c``.

    Examples
    --------
    >>> log_mixture_martingale(0, 0, 0.9)
    0.0
    """
    a, b = prior
    if c <= 0.0:
        return math.inf if successes > 0 else _log_beta(a, b + n) - _log_beta(a, b)
    if c >= 1.0:
        return math.inf if successes < n else _log_beta(a + n, b) - _log_beta(a, b)
    fails = n - successes
    return _log_beta(a + successes, b + fails) - _log_beta(a, b) - successes * math.log(c) - fails * math.log1p(-c)


def coverage_confidence_sequence(
    successes: int, n: int, delta: float, prior: tuple[float, float] = (1.0, 1.0)
) -> tuple[float, float]:
    """Anytime-valid ``1 - delta`` interval for the coverage rate after ``successes`` of ``n`` labels.

    Examples
    --------
    >>> coverage_confidence_sequence(0, 0, 0.05)
    (0.0, 1.0)
    >>> lo, hi = coverage_confidence_sequence(90, 100, 0.05)
    >>> 0.75 < lo < 0.9 < hi < 0.98
    True
    """
    if not (0.0 < delta < 1.0):
        raise ConformalError(f"delta must lie strictly between 0 and 1, got {delta!r}.")
    if n < 0 or not (0 <= successes <= n):
        raise ConformalError(f"Need 0 <= successes <= n, got {successes} of {n}.")
    if n == 0:
        return (0.0, 1.0)
    level = math.log(1.0 / delta)
    mle = successes / n

    def inside(c: float) -> bool:
        return log_mixture_martingale(successes, n, c, prior) < level

    def edge(lo: float, hi: float, inside_at_lo: bool) -> float:
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if inside(mid) == inside_at_lo:
                lo = mid
            else:
                hi = mid
        return hi if inside_at_lo else lo

    lower = 0.0 if inside(0.0) else edge(mle, 0.0, True)
    upper = 1.0 if inside(1.0) else edge(mle, 1.0, True)
    return (min(lower, mle), max(upper, mle))


def aci_next_alpha(alpha_t: float, target: float, gamma: float, miss: bool) -> float:
    """One step of adaptive conformal inference: ``alpha_t + gamma (target - err_t)``.

    Examples
    --------
    >>> round(aci_next_alpha(0.1, 0.1, 0.01, True), 6)
    0.091
    """
    return alpha_t + gamma * (target - (1.0 if miss else 0.0))


def aci_miss(nonconformity: float, threshold: float) -> bool:
    """Whether the set at ``threshold`` missed the gold chunk: a non-finite nonconformity always misses.

    Examples
    --------
    >>> aci_miss(0.3, 0.5), aci_miss(0.7, 0.5), aci_miss(math.inf, math.inf)
    (False, True, True)
    """
    return not math.isfinite(nonconformity) or nonconformity > threshold


def aci_threshold(scores: Iterable[float], alpha_t: float) -> float:
    """The split-conformal threshold at ``alpha_t``; ``+inf`` when ``alpha_t <= 0``, ``-inf`` when ``>= 1``.

    Examples
    --------
    >>> aci_threshold([0.1, 0.2, 0.3], 0.0), aci_threshold([0.1, 0.2, 0.3], 1.2)
    (inf, -inf)
    """
    if alpha_t <= 0.0:
        return math.inf
    if alpha_t >= 1.0:
        return -math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return conformal_quantile(scores, alpha_t)
