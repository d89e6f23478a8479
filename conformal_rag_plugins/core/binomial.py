"""Exact binomial tail, numpy only (no scipy in the core)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["binom_cdf", "binom_cdf_all"]


def binom_cdf_all(n: int, p: float) -> np.ndarray:
    """``[P(X <= x) for x in 0..n]`` for ``X ~ Binomial(n, p)``, from log-space pmf terms.

    Examples
    --------
    >>> binom_cdf_all(2, 0.5).tolist()
    [0.25, 0.75, 1.0]
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if p <= 0.0:
        return np.ones(n + 1)
    if p >= 1.0:
        out = np.zeros(n + 1)
        out[-1] = 1.0
        return out
    i = np.arange(n + 1, dtype=float)
    # log C(n, i) by a cumulative sum of log((n - j + 1) / j), j = 1..i
    log_choose = np.concatenate(([0.0], np.cumsum(np.log((n - i[1:] + 1) / i[1:]))))
    log_pmf = log_choose + i * math.log(p) + (n - i) * math.log1p(-p)
    top = log_pmf.max()
    pmf = np.exp(log_pmf - top)
    cdf = np.cumsum(pmf) / pmf.sum()
    cdf[-1] = 1.0
    return np.minimum(cdf, 1.0)


def binom_cdf(x: int, n: int, p: float) -> float:
    """``P(X <= x)`` for ``X ~ Binomial(n, p)``.

    Examples
    --------
    >>> round(binom_cdf(5, 10, 0.5), 4)
    0.623
    """
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    return float(binom_cdf_all(n, p)[x])
