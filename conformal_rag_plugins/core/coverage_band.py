"""The band that held-out coverage of a split-conformal threshold falls in (exact, numpy only).

Given the calibration draw, coverage is ``Beta(k, n+1-k)`` with ``k = ceil((n+1)(1-alpha))``, so the
covered share of ``m`` test points is Beta-Binomial(``m``, ``k``, ``n+1-k``) / ``m`` for every score
distribution (ties only raise coverage).
"""

from __future__ import annotations

import math

import numpy as np

from .quantile import flagged_rank


def beta_binomial_pmf(m: int, a: float, b: float) -> np.ndarray:
    """``[P(X = j) for j in 0..m]`` for ``X ~ BetaBinomial(m, a, b)``.

    Examples
    --------
    >>> beta_binomial_pmf(2, 1, 1).round(4).tolist()  # uniform on {0, 1, 2}
    [0.3333, 0.3333, 0.3333]
    """
    if m < 0 or a <= 0 or b <= 0:
        raise ValueError(f"need m >= 0, a > 0, b > 0; got m={m}, a={a}, b={b}.")
    lg = math.lgamma
    log_beta_ab = lg(a) + lg(b) - lg(a + b)
    terms = [
        lg(m + 1) - lg(j + 1) - lg(m - j + 1) + lg(j + a) + lg(m - j + b) - lg(m + a + b) - log_beta_ab
        for j in range(m + 1)
    ]
    pmf = np.exp(np.asarray(terms) - max(terms))
    return pmf / pmf.sum()


def split_conformal_band(
    n_calibration: int, n_test: int, alpha: float, level: float = 0.95, *, misses: int = 0
) -> tuple[float, float]:
    """Central ``level`` interval of held-out coverage for a split-conformal threshold.

    The rank is :func:`~.quantile.flagged_rank`'s for a calibration with ``misses`` pool misses, the one
    the threshold uses; ``(nan, nan)`` when there is none (threshold ``+inf``): calibration says nothing then.

    Examples
    --------
    >>> lo, hi = split_conformal_band(200, 300, 0.1)
    >>> lo < 0.9 < hi
    True
    >>> split_conformal_band(5, 10, 0.1)
    (nan, nan)
    """
    if n_test < 1 or n_calibration < 1:
        raise ValueError(f"need n_calibration >= 1 and n_test >= 1, got {n_calibration} and {n_test}.")
    rank = flagged_rank(n_calibration, alpha)
    k = None if rank is None else rank.rank_for(misses)
    if k is None:
        return (math.nan, math.nan)
    cdf = np.cumsum(beta_binomial_pmf(n_test, k, n_calibration + 1 - k))
    tail = (1.0 - level) / 2
    low = int(np.searchsorted(cdf, tail, side="left"))
    high = int(np.searchsorted(cdf, 1.0 - tail - 1e-12, side="left"))
    return (low / n_test, min(high, n_test) / n_test)
