"""Where every threshold is computed: the split-conformal and PAC quantiles.

The split-conformal threshold is the ``ceil((n+1)(1-alpha))``-th smallest score; keeping scores
``<=`` it (ties covered) gives marginal coverage ``>= 1-alpha``. A rank above ``n`` gives ``+inf``
(keep everything), with a warning, or an error with ``strict=True``.

When the candidate pool can miss the gold (a ``+inf`` score), a finite threshold is what a served set
calls ``guaranteed``, and that flag must hold *given the flag*. The marginal theorem alone does not
give it: it counts a miss as covered when the threshold is ``+inf``, so among calibrations with a
finite threshold coverage falls below ``1-alpha`` (0.888 at n = 20 with 4% misses).
:func:`flagged_rank` chooses the rank and the most misses a finite threshold may have so that

``P(covered | finite threshold) >= 1 - alpha``

whenever the pool misses at most a share ``miss_bound`` of questions (default ``alpha / 2``, where
the library already warns about misses). The proof is in :func:`flagged_rank`; with
``miss_bound=0`` (a pool that cannot miss) the rank is the usual ``ceil((n+1)(1-alpha))``.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .binomial import binom_cdf_all, binom_cdf_last_at_most, binom_pmf_head, binom_quantile
from .errors import CalibrationError, ConformalError, InfiniteThresholdWarning
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
    return math.ceil((n + 1) * (1 - Fraction(str(alpha))))


def min_calibration_size(alpha: float) -> int:
    """Smallest n for which the split-conformal threshold is finite.

    Examples
    --------
    >>> min_calibration_size(0.1)
    9
    """
    alpha = check_alpha(alpha)
    # ceil((n+1)(1-alpha)) <= n  <=>  (n+1)(1-alpha) <= n  <=>  n >= 1/alpha - 1 (exact, no O(1/alpha) loop)
    return max(1, math.ceil(1 / Fraction(str(alpha))) - 1)


#: The pool-miss share a guaranteed set assumes by default, as a fraction of alpha: the level at which
#: :func:`~conformal_rag_plugins.core.pool_misses.pool_miss_advice` already warns.
MISS_BOUND_SHARE = Fraction(1, 2)
#: :func:`flagged_min_calibration_size` searches no further than this (it returns the plain minimum past it).
_SEARCH_LIMIT = 10**6
#: The stated confidence at which a calibration's own misses contradict the miss bound: more misses than
#: this quantile of ``Binomial(n, miss_bound)`` withdraw the flag (a one-sided test of "the pool misses
#: at most ``miss_bound``" at level 0.1). A pool that honours the bound keeps the flag in >= 90% of
#: calibrations; one that misses twice the bound loses it in most large calibrations.
MISS_CAP_QUANTILE = 0.9


#: The rule every threshold follows now, as saved files record it (``threshold_rule``): the flagged rank with the
#: plain rank when nothing missed, and misses past the :data:`MISS_CAP_QUANTILE` quantile withdrawing the flag.
THRESHOLD_RULE = "pool-miss-2"
#: The first pool-miss rule (one rank for every miss count, misses past the 0.999 quantile withdrawing the flag):
#: files saved under it still load and serve their thresholds, unflagged, until ``with_current_rule()``.
POOL_MISS_1_RULE = "pool-miss-1"
#: The rule of files saved before ``threshold_rule`` existed: the plain rank, pool misses not accounted for.
PLAIN_RANK_RULE = "plain-rank"
THRESHOLD_RULES = (THRESHOLD_RULE, POOL_MISS_1_RULE, PLAIN_RANK_RULE)
#: The miss cap quantile of :data:`POOL_MISS_1_RULE`.
_POOL_MISS_1_CAP = 0.999

_RULE: ContextVar[str] = ContextVar("conformal_rag_threshold_rule", default=THRESHOLD_RULE)


@contextlib.contextmanager
def threshold_rule(rule: str) -> Iterator[None]:
    """Compute thresholds under ``rule`` inside the block (a default ``miss_bound`` of 0 for :data:`PLAIN_RANK_RULE`).

    What a calibration saved under an older rule uses to check its stored thresholds.

    Examples
    --------
    >>> with threshold_rule(PLAIN_RANK_RULE):
    ...     flagged_rank(100, 0.1).rank
    91
    """
    if rule not in THRESHOLD_RULES:
        raise ConformalError(f"Unknown threshold rule {rule!r}; known: {THRESHOLD_RULES}.")
    token = _RULE.set(rule)
    try:
        yield
    finally:
        _RULE.reset(token)


def current_threshold_rule() -> str:
    """The rule thresholds follow here: :data:`THRESHOLD_RULE`, or another inside :func:`threshold_rule`.

    Examples
    --------
    >>> current_threshold_rule()
    'pool-miss-2'
    """
    return _RULE.get()


def _cap_quantile() -> float:
    """The miss cap quantile of the rule in force (:data:`MISS_CAP_QUANTILE`, or the first rule's 0.999)."""
    return _POOL_MISS_1_CAP if _RULE.get() == POOL_MISS_1_RULE else MISS_CAP_QUANTILE


def default_miss_bound(alpha: float) -> float:
    """The pool-miss share a flagged set assumes when none is given: ``alpha / 2``.

    Examples
    --------
    >>> default_miss_bound(0.1)
    0.05
    """
    return float(Fraction(str(check_alpha(alpha))) * MISS_BOUND_SHARE)


def check_miss_bound(miss_bound: float | None, alpha: float) -> float:
    """``miss_bound`` as a float in ``[0, alpha)``, or :func:`default_miss_bound` for ``None``.

    Examples
    --------
    >>> check_miss_bound(None, 0.2), check_miss_bound(0, 0.2)
    (0.1, 0.0)
    """
    if miss_bound is None:
        return 0.0 if _RULE.get() == PLAIN_RANK_RULE else default_miss_bound(alpha)
    bound = float(miss_bound)
    if not 0.0 <= bound < alpha:
        raise ConformalError(
            f"miss_bound must be in [0, alpha) = [0, {alpha}), got {miss_bound!r}: a pool that misses alpha or more "
            "of the questions cannot reach 1 - alpha."
        )
    return bound


@dataclass(frozen=True)
class FlaggedRank:
    """The ranks a flagged threshold uses and the most calibration misses it may have (see :func:`flagged_rank`).

    ``rank`` serves a calibration with at least one miss, ``rank_without_misses`` one with none (the
    plain ``ceil((n+1)(1-alpha))`` whenever that holds given the flag; ``None``: the same as ``rank``).
    """

    rank: int
    max_misses: int
    miss_bound: float
    rank_without_misses: int | None = None

    def rank_for(self, misses: int) -> int | None:
        """The rank a calibration with ``misses`` misses uses, or ``None`` when they withdraw the flag.

        >>> FlaggedRank(92, 8, 0.05, 91).rank_for(0), FlaggedRank(92, 8, 0.05, 91).rank_for(3)
        (91, 92)
        """
        if misses > self.max_misses:
            return None
        if misses == 0 and self.rank_without_misses is not None:
            return self.rank_without_misses
        return self.rank


def _miss_cap(n: int, bound: float) -> int:
    """The :data:`MISS_CAP_QUANTILE` quantile of ``Binomial(n, bound)`` (``n`` when ``bound`` is 0: no cap)."""
    if bound <= 0.0:
        return n
    return binom_quantile(n, bound, _cap_quantile())


def _holds(n: int, alpha: Fraction, pmf: np.ndarray, cdf: np.ndarray, k0: int, k: int, m_max: int) -> bool:
    """The theorem's condition for ranks ``k0`` (no miss) and ``k`` (1..``m_max`` misses) at the bound's law ``pmf``."""
    a = float(1 - alpha)
    slack0, slack = float(k0 - (1 - alpha) * (n + 1)), float(k - (1 - alpha) * (n + 1))
    flagged_rest = float(cdf[m_max] - cdf[0])
    return slack0 * float(pmf[0]) + slack * flagged_rest >= a * (m_max + 1) * float(pmf[m_max + 1])


@lru_cache(maxsize=4096)
def _flagged_rank(n: int, k0: int, alpha: Fraction, bound: float, rule: str) -> FlaggedRank | None:
    if k0 > n:
        return None
    if bound == 0.0:
        return FlaggedRank(k0, n - k0, 0.0)
    cap = _miss_cap(n, bound)
    pmf = binom_pmf_head(n + 1, bound, min(cap, n - k0) + 1)  # the law of M, the misses among the n + 1 questions
    cdf = np.cumsum(pmf)
    # The plain rank when the calibration has no miss, the smallest rank that then holds for 1..m_max misses ...
    for k in range(k0, n + 1) if rule == THRESHOLD_RULE else ():
        m_max = min(n - k, cap)
        if _holds(n, alpha, pmf, cdf, k0, k, m_max):
            if m_max == 0:  # only a calibration without misses is flagged: it uses k0
                return FlaggedRank(k0, 0, bound)
            return FlaggedRank(k, m_max, bound, k0 if k != k0 else None)
    # ... else one rank for every miss count (also a schedule the theorem covers; the first rule's only one)
    for k in range(k0 if rule != THRESHOLD_RULE else k0 + 1, n + 1):
        m_max = min(n - k, cap)
        if _holds(n, alpha, pmf, cdf, k, k, m_max):
            return FlaggedRank(k, m_max, bound)
    return None


def flagged_rank(n: int, alpha: float, miss_bound: float | None = None) -> FlaggedRank | None:
    """The ranks and the most misses ``m_max`` under which a finite threshold holds given the flag.

    A calibration of ``n`` questions with ``m`` misses (gold outside the pool, score ``+inf``) gets
    the ``k(m)``-th smallest score as its threshold when ``m <= m_max`` (then it is a real score, and
    the served sets say ``guaranteed``), else ``+inf``. ``k(0)`` is the plain rank
    ``k0 = ceil((n+1)(1-alpha))`` whenever the condition below holds with it, so a calibration whose
    pool missed nothing pays nothing; ``k(m) = k`` for ``1 <= m <= m_max`` is the smallest rank that
    then satisfies it (else one rank for every ``m``). ``None`` when no rank qualifies.

    Theorem. Let the ``n`` calibration questions and the test question be exchangeable, ``M`` the
    number of them whose gold is outside the pool, ``F = {m <= m_max}`` the flag, and ``k(j) >= k0``
    with ``k(j) <= n - j``. Then

    ``(n+1) [P(covered and F) - (1-alpha) P(F)] >= sum_{j <= m_max} s_j P(M = j)
    - (1-alpha)(m_max+1) P(M = m_max+1)``,  ``s_j = k(j) - (1-alpha)(n+1) >= 0``,

    so ``P(covered | F) >= 1 - alpha`` whenever the right side is ``>= 0``. If questions miss
    independently with probability ``pi``, ``P(M = j) = C(n+1, j) pi^j (1-pi)^(n+1-j)``; dividing by
    ``(1-pi)^(n+1) t^(m_max+1)`` with ``t = pi / (1-pi)`` leaves ``sum_j C(n+1, j) s_j t^(j-m_max-1) -
    (1-alpha)(m_max+1) C(n+1, m_max+1)``, which decreases in ``t`` (every ``s_j >= 0``). So checking
    ``pi = miss_bound`` -- which is how the ranks are chosen -- covers every ``pi <= miss_bound``:
    an exact statement, not a simulation.

    Proof. Condition on the multiset of the ``n+1`` questions: ``M`` is fixed and the test is a
    uniform draw. If the test is a hit (probability ``(n+1-M)/(n+1)``) the calibration has ``m = M``
    misses, and when ``M <= m_max`` the threshold is the ``k(M)``-th smallest of the ``n+1-M`` hit
    scores but the test's, which covers the test with probability ``>= k(M)/(n+1-M)`` (ties only
    help). If the test is a miss, ``m = M-1`` and it is never covered. Hence
    ``(n+1) P(covered and F) >= sum_{j <= m_max} k(j) P(M = j)`` and
    ``(n+1) P(F) = (n+1-M) 1{M <= m_max} + M 1{M <= m_max+1}``; averaging over ``M``, the terms
    ``(1-alpha) j P(M=j)`` cancel for ``j <= m_max`` and leave the bound. The flag is also withdrawn
    (``m_max`` lowered to the :data:`MISS_CAP_QUANTILE` quantile of ``Binomial(n, miss_bound)``)
    when the misses contradict the bound; the bound holds for any ``m_max``. With
    ``miss_bound=0`` the rank is :func:`conformal_rank` and ``m_max = n - k0``. No rule can promise
    ``1 - alpha`` given the flag when the pool misses more than ``alpha`` of questions.

    Examples
    --------
    >>> flagged_rank(100, 0.1), conformal_rank(100, 0.1)
    (FlaggedRank(rank=92, max_misses=8, miss_bound=0.05, rank_without_misses=91), 91)
    >>> flagged_rank(1000, 0.1).rank_for(0), flagged_rank(12, 0.1), flagged_rank(12, 0.1, miss_bound=0).rank
    (901, None, 12)
    """
    alpha = check_alpha(alpha)
    if n < 1:
        return None
    bound = check_miss_bound(miss_bound, alpha)
    return _flagged_rank(int(n), conformal_rank(n, alpha), Fraction(str(alpha)), bound, _RULE.get())


def flagged_min_calibration_size(alpha: float, miss_bound: float | None = None) -> int:
    """Smallest ``n`` for which :func:`flagged_rank` gives a rank (a threshold that can be flagged).

    Examples
    --------
    >>> flagged_min_calibration_size(0.1), flagged_min_calibration_size(0.1, miss_bound=0)
    (18, 9)
    >>> flagged_min_calibration_size(1e-12) > 10**11  # a lower bound past a million, not searched
    True
    """
    n = min_calibration_size(alpha)
    if n > _SEARCH_LIMIT:  # an adaptive level can come close to 0 (ACI): do not build tables of that size
        return n
    if flagged_rank(n, alpha, miss_bound) is not None:
        return n
    # Whether a rank exists only turns on as n grows: gallop to a size that has one, then bisect
    # (O(log n) calls rather than one per size: ~1/alpha of them at a small adaptive level).
    without, step = n, 1  # ``without``: a size known to have no rank
    while flagged_rank(n + step, alpha, miss_bound) is None:
        without, step = n + step, step * 2
    with_rank = n + step
    while with_rank - without > 1:
        mid = (without + with_rank) // 2
        if flagged_rank(mid, alpha, miss_bound) is None:
            without = mid
        else:
            with_rank = mid
    return with_rank


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


def conformal_quantile(
    scores: Iterable[float], alpha: float, *, strict: bool = False, miss_bound: float | None = None
) -> float:
    """Split-conformal threshold on nonconformity scores (lower conforms better).

    Parameters
    ----------
    scores : iterable of float
        Calibration nonconformity scores; ``+inf`` marks a miss and is kept.
    alpha : float
        Target miscoverage in (0, 1).
    strict : bool, default False
        Raise :class:`CalibrationError` instead of returning ``+inf`` when no rank qualifies or the
        misses are too many for a flagged threshold.
    miss_bound : float or None, default None
        The share of questions the candidate pool may miss (``None``: ``alpha / 2``; ``0``: a pool
        that cannot miss, the plain ``ceil((n+1)(1-alpha))`` rank).

    Returns
    -------
    float
        The ``k``-th smallest score of :func:`flagged_rank`, or ``inf``: a finite threshold covers with
        probability ``>= 1 - alpha`` given that it is finite (see :func:`flagged_rank`).

    Examples
    --------
    >>> conformal_quantile([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], 0.1, miss_bound=0)
    0.9
    >>> conformal_quantile([i / 20 for i in range(1, 21)], 0.1)  # rank 20 of 20: misses are possible
    1.0
    """
    arr = _score_array(scores)
    n = arr.size
    rank = flagged_rank(n, alpha, miss_bound)
    if rank is None:
        k = conformal_rank(n, alpha)
        if k > n:
            return _infinite(
                f"Rank ceil((n+1)(1-alpha)) = {k} exceeds n = {n} calibration points at alpha={alpha}: "
                f"the threshold is +inf and every candidate is included. Use at least "
                f"{flagged_min_calibration_size(alpha, miss_bound)} calibration examples or a larger alpha.",
                strict,
            )
        bound = check_miss_bound(miss_bound, alpha)
        return _infinite(
            f"{n} calibration points are too few at alpha={alpha} for a threshold that holds given its "
            f"guaranteed flag when the pool may miss up to {bound:.3g} of questions: the threshold is +inf and "
            f"every candidate is included. Use at least {flagged_min_calibration_size(alpha, miss_bound)} "
            "calibration examples or a larger alpha.",
            strict,
        )
    misses = int(np.count_nonzero(arr == math.inf))
    k = rank.rank_for(misses)
    if k is None:
        return _infinite(too_many_misses_message(misses, n, alpha, rank), strict)
    return float(np.partition(arr, k - 1)[k - 1])


def too_many_misses_message(misses: int, n: int, alpha: float, rank: FlaggedRank) -> str:
    """Why ``misses`` of ``n`` calibration questions withdraw the flag of ``rank`` (the threshold is then ``+inf``).

    >>> too_many_misses_message(9, 100, 0.1, flagged_rank(100, 0.1))[:60]
    '9 of 100 calibration questions are misses (no gold candidate'
    """
    return (
        f"{misses} of {n} calibration questions are misses (no gold candidate in the pool, +inf), but a threshold "
        f"flagged guaranteed at alpha={alpha} allows at most {rank.max_misses} misses (rank {rank.rank}): more "
        f"contradict the assumed pool-miss rate of at most {rank.miss_bound:.3g} (beyond the {_cap_quantile():g} "
        f"quantile of Binomial({n}, {rank.miss_bound:.3g})) or leave the rank no room. The threshold is +inf, the "
        "flag is withdrawn and every candidate is included. Enlarge the candidate pool or raise alpha (or "
        "miss_bound, if the pool really misses more)."
    )


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


def pac_quantile(
    scores: Iterable[float],
    epsilon: float,
    delta: float,
    *,
    strict: bool = False,
    miss_bound: float | None = None,
) -> float:
    """PAC (epsilon, delta) threshold: miscoverage <= epsilon with probability >= 1-delta, given the flag.

    With ``m`` misses among ``n`` scores the rank is :func:`pac_rank` of the ``h = n - m`` hits at
    ``epsilon' = (epsilon - b) / (1 - b)``, ``b = miss_bound``. Given ``m``, the hit scores are
    i.i.d. and the coverage of the threshold is ``(1 - pi) G(q)`` with ``G(q) ~ Beta(k, h + 1 - k)``,
    so ``P((1 - pi) G(q) < 1 - epsilon) <= P(Binomial(h, 1 - epsilon') >= k) <= delta`` for every miss
    rate ``pi <= b``: the guarantee holds given every ``m``, hence given the flag. More misses than
    the :data:`MISS_CAP_QUANTILE` quantile of ``Binomial(n, b)`` give ``+inf``.

    Parameters
    ----------
    scores : iterable of float
        Calibration nonconformity scores; ``+inf`` marks a miss and is kept.
    epsilon, delta : float
        Miscoverage bound and the probability, over the calibration draw, that it fails.
    strict : bool, default False
        Raise :class:`CalibrationError` instead of returning ``+inf`` when no rank qualifies or the
        misses are too many.
    miss_bound : float or None, default None
        The share of questions the pool may miss (``None``: ``epsilon / 2``; ``0``: the plain
        :func:`pac_rank` of all ``n`` scores, for a pool that cannot miss).

    Returns
    -------
    float
        The ``k``-th smallest score, or ``inf`` when no such ``k`` exists.

    Examples
    --------
    >>> round(pac_quantile([i / 100 for i in range(1, 101)], 0.1, 0.1, miss_bound=0), 2)
    0.95
    >>> round(pac_quantile([i / 100 for i in range(1, 101)], 0.1, 0.1), 2)
    0.98
    """
    arr = _score_array(scores)
    n = arr.size
    bound = check_miss_bound(miss_bound, epsilon)
    misses = int(np.count_nonzero(arr == math.inf)) if bound > 0 else 0
    if misses > _miss_cap(n, bound):
        return _infinite(
            f"{misses} of {n} calibration questions are misses (no gold candidate in the pool, +inf), more than a pool "
            f"missing up to {bound:.3g} of questions makes plausible: the PAC threshold is +inf and every "
            "candidate is included. Enlarge the candidate pool or raise epsilon.",
            strict,
        )
    k = pac_rank(n - misses, (epsilon - bound) / (1 - bound), delta) if n - misses > 0 else None
    if k is None:
        return _infinite(
            f"No rank k <= {n - misses} satisfies BinomCDF(n-k; n, epsilon) <= {delta} for the {n - misses} "
            f"calibration questions with a gold candidate (epsilon={epsilon}, pool misses up to {bound:.3g}): "
            "the PAC threshold is +inf and every candidate is included. Use more calibration examples.",
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


def _miss_share_cap(n: int, bound: float) -> float:
    """The summed miss share above which ``n`` questions contradict a mean share ``<= bound``.

    Chernoff-Hoeffding for values in [0, 1] with mean ``<= bound``: ``P(sum > n x) <= exp(-n KL(x || bound))``,
    which is ``1 - MISS_CAP_QUANTILE`` at the returned ``n x`` (``n`` when no ``x < 1`` reaches it).
    """
    target = -math.log1p(-_cap_quantile()) / n

    def kl(x: float) -> float:
        return x * math.log(x / bound) + (1 - x) * math.log((1 - x) / (1 - bound))

    if kl(1 - 1e-12) < target:
        return float(n)
    lo, hi = bound, 1 - 1e-12
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if kl(mid) < target else (lo, mid)
    return n * hi


@dataclass(frozen=True)
class _RecallCurve:
    lambdas: np.ndarray
    total: np.ndarray  # summed loss at each lambda: of the gold chunks in the pool (b > 0), or of all (b = 0)
    n: int
    level: Fraction  # the level the loss is controlled at
    misses: float  # the summed share of gold chunks outside the pool
    cap: float  # the summed miss share above which the bound b is contradicted (no flag)
    bound: float  # b, the share of gold chunks the pool may miss


def _recall_curve(gold_scores: Sequence[Sequence[float]], alpha: float, miss_bound: float | None) -> _RecallCurve:
    """With a miss bound ``b > 0``: the loss inside the pool at ``(alpha - b) * MISS_CAP_QUANTILE``; with
    ``b = 0`` the loss of every gold chunk at ``alpha`` (the plain rule)."""
    alpha = check_alpha(alpha)
    bound = check_miss_bound(miss_bound, alpha)
    lambdas, total, n = risk_curve(gold_scores)
    misses = float(total[-1]) if total.size else float(n)
    if bound == 0:
        return _RecallCurve(lambdas, total, n, Fraction(str(alpha)), misses, float(n), 0.0)
    level = (Fraction(str(alpha)) - Fraction(bound)) * Fraction(str(_cap_quantile()))
    return _RecallCurve(lambdas, np.maximum(total - misses, 0.0), n, level, misses, _miss_share_cap(n, bound), bound)


def _too_many_recall_misses(curve: _RecallCurve, alpha: float, strict: bool) -> float | None:
    if curve.misses <= curve.cap + _LOSS_TOL:
        return None
    return _infinite(
        f"The {curve.n} calibration questions miss {curve.misses:.4g} gold chunks' worth outside the pool (summed "
        f"share), more than a pool missing up to {curve.bound:.3g} of them makes plausible at {_cap_quantile():g} "
        f"confidence ({curve.cap:.4g}): the flag is withdrawn, the threshold is +inf and every candidate is "
        "included. Enlarge the candidate pool or raise alpha (or miss_bound, if the pool really misses more).",
        strict,
    )


def crc_threshold(
    gold_scores: Sequence[Sequence[float]], alpha: float, *, strict: bool = False, miss_bound: float | None = None
) -> float:
    """Conformal risk control of the miss rate ``1 - recall`` (Angelopoulos et al., 2022), given the flag.

    The loss of a question is ``mu + L_in(lam)``: ``mu`` the share of its gold chunks outside the pool
    (no finite threshold keeps them) and ``L_in`` the share inside the pool left out at ``lam``. CRC
    on ``L_in`` at level ``a = (alpha - b) c`` (``b = miss_bound``, ``c = MISS_CAP_QUANTILE``):
    ``lam = inf{lam : (sum L_in(lam) + 1)/(n+1) <= a}`` gives ``E[L_in] <= a``; ``L_in`` is 0 at the
    largest finite ``lam``, so ``lam`` is finite whenever ``n >= 1/a - 1``. The flag ``F`` also needs the
    summed miss share below the Chernoff cap of a mean ``b``, so ``P(F) >= c`` when ``E[mu] <= b``. The
    test's ``mu`` is independent of the calibration, so ``E[1 - recall | F] <= E[mu] + E[L_in]/P(F) <= b +
    (alpha - b) = alpha``. ``miss_bound=0`` is the plain rule on every gold chunk (misses as loss),
    valid only marginally.

    Examples
    --------
    >>> crc_threshold([[i / 10] for i in range(1, 10)], 0.1, miss_bound=0)  # one gold each: the split quantile
    0.9
    >>> crc_threshold([[0.1, 0.5]] * 19, 0.1, miss_bound=0)  # half of each question's gold at 0.1 is not enough
    0.5
    >>> crc_threshold([[i / 60] for i in range(1, 61)], 0.1)  # in-pool level (0.1 - 0.05) 0.9: 1 + sum <= 2.745
    0.9833333333333333
    """
    curve = _recall_curve(gold_scores, alpha, miss_bound)
    refused = _too_many_recall_misses(curve, alpha, strict)
    if refused is not None:
        return refused
    lambdas, total, n, level = curve.lambdas, curve.total, curve.n, curve.level
    # (n R + 1)/(n+1) <= level  <=>  n R <= level (n+1) - 1, with level (n+1) exact
    bound = float(level * (n + 1) - 1)
    ok = np.flatnonzero(total <= bound + _LOSS_TOL)
    if ok.size:
        return float(lambdas[ok[0]])
    lowest = ((float(total[-1]) if total.size else n) + 1) / (n + 1)
    return _infinite(
        f"No finite threshold brings the corrected mean miss rate (n R + 1)/(n+1) of {n} calibration questions "
        f"to {float(level):.4g} (alpha={alpha}, less the share the pool may miss; at the largest it is "
        f"{lowest:.4g}): the threshold is +inf and every candidate is included, so recall then rests on the pool "
        f"alone. Use at least {math.ceil(1 / level) - 1} calibration questions, a larger pool or a larger alpha.",
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


def ltt_threshold(
    gold_scores: Sequence[Sequence[float]],
    alpha: float,
    delta: float,
    *,
    strict: bool = False,
    miss_bound: float | None = None,
) -> float:
    """Learn-then-Test threshold: ``P(E[1 - recall | calibration] <= alpha) >= 1 - delta``, given the flag.

    Fixed-sequence testing of ``H_lam: R_in(lam) > alpha - b`` (Hoeffding-Bentkus p-values, ``b =
    miss_bound``, ``R_in`` the risk of the gold chunks inside the pool) from the largest ``lam`` down at
    level ``delta c`` (``c = MISS_CAP_QUANTILE``); the smallest rejected ``lam`` is returned
    (Angelopoulos et al., 2021). The first test (loss 0) does not depend on the data; the flag ``F``
    also needs the summed miss share below the Chernoff cap of a mean ``b`` (``P(F) >= c`` when
    ``E[mu] <= b``), so ``P(R > alpha | F) <= P(R_in > alpha - b) / P(F) <= delta`` with ``R = E[mu] +
    R_in``. ``miss_bound=0`` tests the risk of every gold chunk at ``alpha`` (misses as loss).

    Examples
    --------
    >>> ltt_threshold([[i / 100] for i in range(1, 201)], 0.1, 0.1, miss_bound=0)  # exact-binomial PAC: 1.86
    1.88
    """
    delta = check_alpha(delta, "delta")
    curve = _recall_curve(gold_scores, alpha, miss_bound)
    refused = _too_many_recall_misses(curve, alpha, strict)
    if refused is not None:
        return refused
    lambdas, total, n = curve.lambdas, curve.total, curve.n
    bound = check_miss_bound(miss_bound, alpha)
    test_level = float(Fraction(str(alpha)) - Fraction(bound)) if bound > 0 else float(curve.level)
    test_delta = delta * _cap_quantile() if bound > 0 else delta
    pvalues = _hb_pvalues(total / n, n, test_level)
    rejected = None
    for j in range(lambdas.size - 1, -1, -1):
        if pvalues[j] > test_delta:
            break
        rejected = j
    if rejected is not None:
        return float(lambdas[rejected])
    need = math.ceil(math.log(test_delta) / math.log1p(-test_level))
    return _infinite(
        f"Learn-then-Test rejects no finite threshold for {n} calibration questions at alpha={alpha}, "
        f"delta={delta} (tested at {test_level:.4g}, less the share the pool may miss): the threshold is +inf "
        "and every candidate is included, so recall then rests on the pool alone. Even with no loss at all it "
        f"needs n >= {need}; use more questions, a larger pool or a larger alpha.",
        strict,
    )
