"""Exact binomial tail, numpy/stdlib only (no scipy in the core)."""

from __future__ import annotations

import math

__all__ = ["binom_cdf"]


def binom_cdf(x: int, n: int, p: float) -> float:
    """``P(X <= x)`` for ``X ~ Binomial(n, p)``, summed in log space.

    Examples
    --------
    >>> round(binom_cdf(5, 10, 0.5), 4)
    0.623
    """
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(x + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))
