"""Exact binomial tail, numpy only (no scipy in the core).

:func:`binom_cdf_all` builds the whole CDF table (``O(n)``). :func:`binom_cdf_last_at_most`
answers the question the PAC rank asks ("largest ``x`` with ``P(X <= x) <= level``") from a window
of ``O(sqrt(n))`` terms around the mode, and gives exactly the answer the table would: when a CDF
value lies within the combined rounding bound of both computations from ``level``, it asks the table.
"""

from __future__ import annotations

import math

import numpy as np


def _log_pmf(n: int, p: float) -> np.ndarray:
    """``log P(X = x)`` up to a constant for ``x in 0..n``, ``0 < p < 1``."""
    i = np.arange(n + 1, dtype=float)
    # log C(n, i) by a cumulative sum of log((n - j + 1) / j), j = 1..i
    log_choose = np.concatenate(([0.0], np.cumsum(np.log((n - i[1:] + 1) / i[1:]))))
    log_pmf = log_choose + i * math.log(p) + (n - i) * math.log1p(-p)
    return log_pmf - log_pmf.max()


def binom_pmf_all(n: int, p: float) -> np.ndarray:
    """``[P(X = x) for x in 0..n]`` for ``X ~ Binomial(n, p)``, from log-space terms (tails keep their precision).

    Examples
    --------
    >>> binom_pmf_all(2, 0.5).tolist()
    [0.25, 0.5, 0.25]
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if p <= 0.0 or p >= 1.0:
        out = np.zeros(n + 1)
        out[0 if p <= 0.0 else -1] = 1.0
        return out
    pmf = np.exp(_log_pmf(n, p))
    return pmf / pmf.sum()


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
    pmf = np.exp(_log_pmf(n, p))
    cdf = np.cumsum(pmf) / pmf.sum()
    cdf[-1] = 1.0
    return np.minimum(cdf, 1.0)


def binom_pmf_head(n: int, p: float, last: int) -> np.ndarray:
    """``P(X = x)`` for ``x in 0..last`` (``X ~ Binomial(n, p)``), up to one common positive factor.

    From the exact ratios ``pmf(x) / pmf(x-1)`` in log space, ``O(last)`` terms rather than the whole
    table: what a comparison of ratios of head terms needs (the flagged rank, the miss cap).

    Examples
    --------
    >>> w = binom_pmf_head(4, 0.5, 2)
    >>> np.round(w / w[0], 12).tolist()
    [1.0, 4.0, 6.0]
    """
    last = min(int(last), n)
    if last < 0:
        return np.zeros(0)
    if p <= 0.0 or p >= 1.0:
        return binom_pmf_all(n, p)[: last + 1]
    j = np.arange(1, last + 1, dtype=float)
    log_w = np.concatenate(([0.0], np.cumsum(np.log((n - j + 1) / j) + (math.log(p) - math.log1p(-p)))))
    return np.exp(log_w - log_w.max())


def binom_quantile(n: int, p: float, level: float) -> int:
    """Smallest ``x`` with ``P(X <= x) > level`` for ``X ~ Binomial(n, p)`` (the quantile), from ``O(sqrt(n))`` terms.

    Examples
    --------
    >>> binom_quantile(100, 0.05, 0.9), binom_quantile(1000, 0.05, 0.999)
    (8, 73)
    """
    if p <= 0.0:
        return 0
    return min(n, binom_cdf_last_at_most(n, p, level) + 1)


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


_U = 2.0**-53  # unit roundoff of float64
#: Terms left out of the window weigh less than ``exp(-_TAIL)`` times ``min(level, 1 - level)``.
_TAIL = 42.0
#: Below this level the table's own terms underflow near the answer: ask the table.
_MIN_FAST_LEVEL = 1e-250


def _last_in_table(n: int, p: float, level: float, x_max: int) -> int:
    """Largest ``x <= x_max`` with ``binom_cdf_all(n, p)[x] <= level``, or -1 (the reference)."""
    ok = np.flatnonzero(binom_cdf_all(n, p)[: x_max + 1] <= level)
    return int(ok[-1]) if ok.size else -1


def _last_in_window(n: int, p: float, level: float, x_max: int) -> int | None:
    """The same answer from the terms around the mode, or ``None`` when it is too close to call.

    The window holds every term heavier than ``exp(-_TAIL) * min(level, 1 - level)`` of the peak
    (log-concave pmf: the tails are bounded geometrically), built from the exact ratio
    ``pmf(j) / pmf(j-1)``. An answer is returned only when the CDF at ``x`` and ``x + 1`` is farther
    from ``level`` than both computations' rounding (the table's is about ``n * u`` per term), so
    both agree.
    """
    log_p, log_q = math.log(p), math.log1p(-p)
    logit = log_p - log_q
    mode = min(n, int((n + 1) * p))
    need = _TAIL - math.log(min(level, 1.0 - level))
    t = math.ceil(math.sqrt(n * p * (1.0 - p) * 2.0 * need)) + 16
    while True:
        lo, hi = max(0, mode - t), min(n, mode + t)
        j = np.arange(lo + 1, hi + 1, dtype=float)
        # log pmf(j) - log pmf(j-1) = log((n - j + 1) / j) + log(p / (1 - p)), exact up to rounding
        log_w = np.concatenate(([0.0], np.cumsum(np.log((n - j + 1) / j) + logit)))
        log_w -= log_w.max()
        cum = np.cumsum(np.exp(log_w))
        budget = math.log(cum[-1]) - need
        covered = True
        if lo > 0:  # terms below lo shrink at least geometrically with ratio r
            r = lo * (1.0 - p) / ((n - lo + 1) * p)
            covered = r < 1.0 and log_w[0] + math.log(r / (1.0 - r)) < budget
        if covered and hi < n:
            r = (n - hi) * p / ((hi + 1) * (1.0 - p))
            covered = r < 1.0 and log_w[-1] + math.log(r / (1.0 - r)) < budget
        if covered or (lo == 0 and hi == n):
            break
        t *= 2
    cdf = cum / cum[-1]
    width = hi - lo + 1
    # Rounding bounds (relative, on CDF values): the table's log terms reach n*(log 2 + |log p| + |log q|)
    # and its cumulative sums drift by at most one rounding of that per step across the window; ours
    # stay below `need` plus a step; both sum <= n + width terms; the neglected tails weigh <= e^-_TAIL.
    table_scale = n * (math.log(2.0) + abs(log_p) + abs(log_q)) + 64.0
    window_scale = float(-log_w.min()) + math.log(n + 1.0) + abs(logit) + 64.0
    tol = 4.0 * (width + 8) * _U * (table_scale + window_scale) + 4.0 * (n + width + 64) * _U + 4.0 * math.exp(-_TAIL)
    x = min(lo + int(np.searchsorted(cdf, level, side="right")) - 1, x_max)
    if lo <= x and not cdf[x - lo] <= level * (1.0 - tol):
        return None  # P(X <= x) too close to level
    if x + 1 <= x_max and not (x + 1 <= hi and cdf[x + 1 - lo] > level * (1.0 + tol)):
        return None  # P(X <= x + 1) too close to level
    return x


def binom_cdf_last_at_most(n: int, p: float, level: float, x_max: int | None = None) -> int:
    """Largest ``x <= x_max`` with ``P(X <= x) <= level`` for ``X ~ Binomial(n, p)``, or -1.

    Exactly the answer of the table :func:`binom_cdf_all`, from ``O(sqrt(n))`` terms around the
    mode; the table is built only when a CDF value lies within rounding of ``level``, or
    ``level < 1e-250``.

    Examples
    --------
    >>> binom_cdf_last_at_most(100, 0.1, 0.1, x_max=99)
    5
    >>> binom_cdf_last_at_most(10, 0.1, 0.1)
    -1
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    x_max = n if x_max is None else min(int(x_max), n)
    if x_max < 0:
        return -1
    if not (0.0 < p < 1.0) or not (_MIN_FAST_LEVEL <= level < 1.0):
        return _last_in_table(n, p, level, x_max)
    x = _last_in_window(n, p, level, x_max)
    return _last_in_table(n, p, level, x_max) if x is None else x


def clopper_pearson_upper(successes: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a binomial proportion.

    The largest ``p`` with ``P(X <= successes) >= 1 - confidence`` for ``X ~ Binomial(n, p)``, so
    that the true proportion lies below the bound with probability at least ``confidence``
    (exact, conservative). Found by bisection on :func:`binom_cdf` (decreasing in ``p``).

    Examples
    --------
    >>> round(clopper_pearson_upper(0, 5, 0.95), 4)  # 1 - 0.05 ** (1 / 5)
    0.4507
    >>> clopper_pearson_upper(5, 5)
    1.0
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if successes == n:
        return 1.0
    lo, hi = successes / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if binom_cdf(successes, n, mid) >= 1.0 - confidence:
            lo = mid
        else:
            hi = mid
    return lo


def binom_sf_grid(k: int, n: int, ps: np.ndarray | list[float]) -> np.ndarray:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)`` at every ``p`` of ``ps`` (log-space terms summed per ``p``).

    Examples
    --------
    >>> binom_sf_grid(1, 2, [0.0, 0.5, 1.0]).tolist()
    [0.0, 0.75, 1.0]
    """
    p = np.asarray(ps, dtype=float)
    if k <= 0:
        return np.ones(p.shape)
    if k > n:
        return np.zeros(p.shape)
    out = np.where(p >= 1.0, 1.0, 0.0)
    inner = (p > 0.0) & (p < 1.0)
    if inner.any():
        x = np.arange(k, n + 1, dtype=float)
        i = np.arange(1, n + 1, dtype=float)
        log_choose = np.concatenate(([0.0], np.cumsum(np.log((n - i + 1) / i))))[k:]
        q = p[inner][:, None]
        terms = log_choose + x * np.log(q) + (n - x) * np.log1p(-q)
        top = terms.max(axis=1, keepdims=True)
        out[inner] = np.minimum(1.0, np.exp(top[:, 0]) * np.exp(terms - top).sum(axis=1))
    return out
