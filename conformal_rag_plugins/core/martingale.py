"""Online conformal test martingales: smoothed p-values against a growing bag, and the Simple Jumper.

Vovk et al. 2021 ("Retrain or not retrain"). Each query's label-free strangeness gets a smoothed
p-value against the calibration values **plus every earlier stream value** (against the fixed
bag only, the p-values would be dependent); under exchangeability they are i.i.d. uniform (ALRW Thm 8.1). The
Simple Jumper bets on them; by Ville's inequality an alarm at ``M_t >= 1/delta`` is false with
probability at most ``delta`` over the whole, unbounded stream. Capitals are kept in log space;
tie-breaking uniforms come from :func:`tie_uniform` (seed, step), so a replay reproduces the
martingale, which lets a saved monitor be re-checked on load. See docs/production/monitor.md.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Sequence

from .errors import ConformalError

_MASK = (1 << 64) - 1


def _logaddexp(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))`` without overflow (``-inf`` allowed)."""
    hi, lo = (a, b) if a >= b else (b, a)
    if hi == -math.inf:
        return -math.inf
    return hi + math.log1p(math.exp(lo - hi))


def tie_uniform(seed: int, step: int) -> float:
    """A uniform number in (0, 1) from SplitMix64 of ``(seed, step)``: stateless, reproducible, fast.

    Examples
    --------
    >>> tie_uniform(0, 1) == tie_uniform(0, 1), 0.0 < tie_uniform(3, 7) < 1.0
    (True, True)
    """
    z = (int(seed) * 0x9E3779B97F4A7C15 + int(step) * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return ((z >> 11) + 0.5) / float(1 << 53)


def check_delta(delta: float, name: str = "delta") -> float:
    """Return ``delta`` as a float strictly inside (0, 1), else raise :class:`ConformalError`.

    Examples
    --------
    >>> check_delta(1.0)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: delta must lie strictly between 0 and 1 ...
    """
    try:
        value = float(delta)
    except (TypeError, ValueError) as exc:
        raise ConformalError(f"{name} must be a number in (0, 1), got {delta!r}.") from exc
    if not (0.0 < value < 1.0):
        raise ConformalError(
            f"{name} must lie strictly between 0 and 1 (the false-alarm probability; the alarm is at a "
            f"martingale of 1/{name}), got {delta!r}."
        )
    return value


def check_statistics(values: Iterable[float], what: str = "statistic") -> list[float]:
    """Floats, refusing NaN (``+/-inf`` are allowed: an empty pool has top-1 score ``-inf``).

    Examples
    --------
    >>> check_statistics([0.5, float("nan")])
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: A NaN statistic ...
    """
    out = [float(v) for v in values]
    bad = [i for i, v in enumerate(out) if math.isnan(v)]
    if bad:
        raise ConformalError(
            f"A NaN {what} at position {bad[0]} ({len(bad)} in all): the drift test needs a number for every "
            "query; check the host's scores."
        )
    return out


def smoothed_pvalue(bag: Sequence[float], value: float, u: float) -> float:
    """Smoothed conformal p-value of strangeness ``value`` against the sorted ``bag`` (larger = stranger).

    ``(#{a > value} + u (#{a == value} + 1)) / (len(bag) + 1)``: uniform under exchangeability.

    Examples
    --------
    >>> smoothed_pvalue([0.1, 0.2, 0.3], 0.25, 0.5)
    0.375
    """
    n = len(bag)
    greater = n - bisect_right(bag, value)
    equal = bisect_right(bag, value) - bisect_left(bag, value)
    return (greater + u * (equal + 1)) / (n + 1)


class SimpleJumper:
    """The Simple Jumper test martingale (Vovk et al. 2021), in log space.

    It mixes the bets ``f_e(p) = 1 + e (p - 1/2)``, ``e in {-1, 0, 1}``, moving a share ``J = jump``
    of the capital equally over them at each step, so that it follows a change.

    Examples
    --------
    >>> m = SimpleJumper()
    >>> [round(m.update(0.01), 3) + 0.0 for _ in range(3)]  # small p-values: the bet e = -1 earns
    [0.0, 0.147, 0.388]
    """

    EPSILONS = (-1.0, 0.0, 1.0)

    def __init__(self, jump: float = 0.01) -> None:
        if not (0.0 <= float(jump) <= 1.0):
            raise ConformalError(f"jump must lie in [0, 1], got {jump!r}.")
        self.jump = float(jump)
        self._log_c = [math.log(1.0 / 3.0)] * 3
        self.log_value = 0.0  # log M_0 = log 1

    def update(self, p: float) -> float:
        """Bet on ``p`` and return ``log M_t``."""
        if not (0.0 <= p <= 1.0):
            raise ConformalError(f"A p-value must lie in [0, 1], got {p!r}.")
        total = self.log_value
        keep = math.log1p(-self.jump) if self.jump < 1.0 else -math.inf
        share = math.log(self.jump / 3.0) + total if self.jump > 0.0 else -math.inf
        new = []
        for eps, log_c in zip(self.EPSILONS, self._log_c, strict=True):
            mixed = _logaddexp(keep + log_c, share)
            new.append(mixed + math.log(1.0 + eps * (p - 0.5)))
        self._log_c = new
        self.log_value = _logaddexp(_logaddexp(new[0], new[1]), new[2])
        return self.log_value


class OnlineConformalTest:
    """Exchangeability test of a stream against a reference bag: p-values, martingale, first alarm.

    The alarm is at ``M_t >= 1/delta`` (Ville). ``first_step`` is this test's first position in a
    longer stream (position ``i`` draws ``tie_uniform(seed, i)``), so a restarted test never reuses
    earlier uniforms.

    Examples
    --------
    >>> test = OnlineConformalTest([0.1, 0.2, 0.3, 0.4], delta=0.1)
    >>> p = test.update(0.25)
    >>> test.n_stream, len(test.bag)
    (1, 5)
    """

    def __init__(
        self, reference: Iterable[float], *, delta: float, jump: float = 0.01, seed: int = 0, first_step: int = 0
    ) -> None:
        ref = check_statistics(reference, "calibration statistic")
        if not ref:
            raise ConformalError("The drift test needs at least one calibration statistic.")
        self.delta = check_delta(delta)
        self.seed = int(seed)
        if int(first_step) < 0:
            raise ConformalError(f"first_step must be >= 0, got {first_step!r}.")
        self.first_step = int(first_step)
        self.n_reference = len(ref)
        self.bag = sorted(ref)
        self.martingale = SimpleJumper(jump)
        self.n_stream = 0
        self.alarm_at: int | None = None
        self.p_values: list[float] = []
        self.log_path: list[float] = []  # log M_t after each query
        self._log_threshold = math.log(1.0 / self.delta)

    @property
    def log_threshold(self) -> float:
        """``log(1/delta)``."""
        return self._log_threshold

    def update(self, strangeness: float) -> float:
        """Add one query's strangeness; return its p-value (the bag and martingale move on)."""
        value = float(strangeness)
        if math.isnan(value):
            check_statistics([value])
        u = tie_uniform(self.seed, self.first_step + self.n_stream)
        p = smoothed_pvalue(self.bag, value, u)
        insort(self.bag, value)
        log_m = self.martingale.update(p)
        self.p_values.append(p)
        self.log_path.append(log_m)
        if self.alarm_at is None and log_m >= self._log_threshold:
            self.alarm_at = self.n_stream
        self.n_stream += 1
        return p


def restart_delta(delta: float, restarts: int) -> float:
    """The false-alarm level of a monitor after ``restarts`` restarts: ``delta / 2**restarts``.

    Each restart starts a fresh martingale, so by Ville and the union bound all restarted runs
    together false-alarm with probability at most ``delta/2 + delta/4 + ... < delta``, and all runs
    with the first one (at ``delta``) below ``2 * delta``.

    Examples
    --------
    >>> restart_delta(0.05, 0), restart_delta(0.05, 2)
    (0.05, 0.0125)
    >>> sum(restart_delta(0.05, k) for k in range(1, 30)) < 0.05 < sum(restart_delta(0.05, k) for k in range(2)) < 0.1
    True
    """
    delta = check_delta(delta)
    k = int(restarts)
    if k < 0:
        raise ConformalError(f"The number of restarts must be >= 0, got {restarts!r}.")
    return math.ldexp(delta, -k)


#: Label-free statistics of one query, each oriented so that worse retrieval is stranger.
STATISTICS: tuple[str, ...] = ("top1", "gap", "set_size")


def strangeness(statistic: str, value: float) -> float:
    """Orient a statistic so that larger means stranger (worse retrieval gives small p-values).

    ``top1`` and ``gap`` (best minus second) are negated; ``set_size`` (before ``min_k``/``max_k``) is kept.

    Examples
    --------
    >>> strangeness("top1", 0.8), strangeness("set_size", 3)
    (-0.8, 3.0)
    """
    if statistic not in STATISTICS:
        raise ConformalError(f"Unknown drift statistic {statistic!r}; choose one of {', '.join(STATISTICS)}.")
    return float(value) if statistic == "set_size" else -float(value)


def query_statistic(statistic: str, scores: Sequence[float], set_size: int | None = None) -> float:
    """The raw statistic of one query from its candidate scores (best first) and conformal set size.

    An empty pool has top-1 score ``-inf``; a pool of one candidate has gap ``+inf``.

    Examples
    --------
    >>> query_statistic("top1", [0.9, 0.7]), round(query_statistic("gap", [0.9, 0.7]), 6)
    (0.9, 0.2)
    """
    if statistic == "set_size":
        if set_size is None:
            raise ConformalError("The set_size statistic needs the query's conformal set size.")
        return float(set_size)
    if statistic == "top1":
        return float(scores[0]) if len(scores) else -math.inf
    if statistic == "gap":
        return float(scores[0]) - float(scores[1]) if len(scores) > 1 else math.inf
    raise ConformalError(f"Unknown drift statistic {statistic!r}; choose one of {', '.join(STATISTICS)}.")
