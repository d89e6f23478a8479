"""What the guaranteed flag promises at a given pool-miss rate, computed exactly (no simulation).

For continuous hit scores and questions that miss the pool independently with probability ``pi``:

- :func:`split_given_flag`: ``P(covered | flag)`` and ``P(flag)`` of the split threshold;
- :func:`pac_given_flag`: ``P(coverage < 1 - epsilon | flag)`` and ``P(flag)`` of the PAC threshold.

Both follow the rule in force (:func:`~conformal_rag_plugins.core.quantile.threshold_rule`), so the
current rule and an older one are computed by the same code. The simulations through the library, which
these numbers are checked against, are in :mod:`conformal_rag_plugins.evaluation.flag_trials`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.binomial import binom_cdf_all, binom_pmf_all
from ..core.quantile import _miss_cap, check_miss_bound, flagged_rank, pac_rank


@dataclass(frozen=True)
class GivenFlag:
    """A rule's figure given its flag (``nan`` when it is never flagged) and the chance of the flag."""

    given_flag: float
    flag_rate: float


def split_given_flag(n: int, alpha: float, pi: float, *, miss_bound: float | None = None) -> GivenFlag:
    """``P(covered | flag)`` and ``P(flag)`` of the split threshold on ``n`` questions missing at rate ``pi``.

    With ``m`` calibration misses the threshold is the ``k(m)``-th smallest score
    (:meth:`~conformal_rag_plugins.core.quantile.FlaggedRank.rank_for`), the ``k(m)``-th of the ``n - m``
    hits, which covers a hit with probability ``k(m) / (n - m + 1)``; a missed test is never covered.

    Examples
    --------
    >>> g = split_given_flag(100, 0.1, 0.05)
    >>> g.given_flag >= 0.9, round(g.flag_rate, 2)
    (True, 0.94)
    """
    rank = flagged_rank(n, alpha, miss_bound)
    if rank is None:
        return GivenFlag(math.nan, 0.0)
    weights = binom_pmf_all(n, pi)
    covered = flag = 0.0
    for m in range(rank.max_misses + 1):
        k = rank.rank_for(m)
        if k is None or k > n - m:
            continue
        covered += float(weights[m]) * (1.0 - pi) * k / (n - m + 1)
        flag += float(weights[m])
    return GivenFlag(covered / flag if flag > 0 else math.nan, flag)


def pac_given_flag(
    n: int, epsilon: float, delta: float, pi: float, *, miss_bound: float | None = None
) -> GivenFlag:
    """``P(coverage < 1 - epsilon | flag)`` and ``P(flag)`` of the PAC threshold (:func:`~.quantile.pac_quantile`).

    Given ``m`` misses the threshold is the ``k``-th of the ``h = n - m`` hits, so its coverage is
    ``(1 - pi) G`` with ``G ~ Beta(k, h + 1 - k)``, below ``1 - epsilon`` iff ``Bin(h, (1 - epsilon) / (1 - pi)) >= k``.

    Examples
    --------
    >>> g = pac_given_flag(100, 0.1, 0.1, 0.05)
    >>> g.given_flag <= 0.1
    True
    """
    bound = check_miss_bound(miss_bound, epsilon)
    cap = _miss_cap(n, bound)
    weights = binom_pmf_all(n, pi)
    bad = flag = 0.0
    for m in range(n + 1):
        h = n - m
        if m > cap or h == 0:
            continue
        k = pac_rank(h, (epsilon - bound) / (1 - bound), delta) if bound > 0 else pac_rank(n, epsilon, delta)
        if k is None or k > h:
            continue
        c = (1 - epsilon) / (1 - pi)
        p_bad = 1.0 if c >= 1 else 1.0 - float(binom_cdf_all(h, c)[k - 1])
        bad += float(weights[m]) * p_bad
        flag += float(weights[m])
    return GivenFlag(bad / flag if flag > 0 else math.nan, flag)
