"""Which end-to-end levels a generator can reach under the current flag rule, before its calibration is sampled.

The generator stage's threshold is flagged (finite) only when its calibration misses (questions with
no correct sampled answer, the share ``1 - ceiling``) stay within what
:func:`~conformal_rag_plugins.core.quantile.flagged_rank` allows at ``alpha_generation`` and the stage's
miss bound ``b``, and its guarantee assumes a miss rate ``<= b``. So a ceiling ``c`` reaches a level
when ``1 - c <= min(b, m_max / n)``: with the default ``b = alpha_generation / 2`` a generator needs a
ceiling of about ``1 - alpha_generation / 2``; a bound chosen on held-out questions
(``SplitOptions(generator_miss_bound="held-out")``) lets it go up to ``b`` just below
``alpha_generation``. Everything is computed with :mod:`~conformal_rag_plugins.core.quantile`, so it
follows the rule the calibration will use.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from ..core.errors import ConformalError
from ..core.quantile import check_miss_bound, current_threshold_rule, flagged_rank
from ..core.validation import alpha_from_confidence_level
from .options import HELD_OUT, SplitOptions

#: Confidence levels searched by :func:`highest_level` (0.01 steps).
LEVEL_GRID = tuple(round(0.01 * i, 2) for i in range(99, 0, -1))
#: Shares of ``alpha_generation`` tried as a held-out bound (the bound is chosen on data, so every one may come up).
_HELD_OUT_SHARES = (*(i / 100 for i in range(5, 100, 5)), 0.99)


def generator_share(alpha: float, split: SplitOptions) -> float:
    """The part of ``alpha`` left to the generator stage, as the calibration will split it.

    Bonferroni/PAC: ``alpha - alpha_retrieval`` (default ``alpha / 2``); HMP: ``alpha (1 - w / 2)``
    (its generator level; the rule itself needs a little more); ``optimise=True``: all of ``alpha``
    (the optimiser may give the generator nearly all of it), the most lenient.

    >>> generator_share(0.2, SplitOptions()), generator_share(0.2, SplitOptions(alpha_retrieval=0.05))
    (0.1, 0.15000000000000002)
    >>> generator_share(0.2, SplitOptions(method="hmp")), generator_share(0.2, SplitOptions(optimise=True))
    (0.15000000000000002, 0.2)
    """
    if split.optimise:
        return alpha
    if split.method == "hmp":
        w = 0.5 if split.hmp_weight is None else float(split.hmp_weight)
        return alpha * (1 - w / 2)
    return alpha / 2 if split.alpha_retrieval is None else alpha - float(split.alpha_retrieval)


@dataclass(frozen=True)
class GeneratorNeed:
    """What a flagged generator threshold needs at one level: ``alpha_generation``, its bound and the ceiling.

    ``ceiling`` is ``None`` when even a generator that never misses gets no flag (too few questions).
    """

    confidence_level: float
    alpha_generation: float
    miss_bound: float
    n: int
    max_misses: int | None
    ceiling: float | None

    def describe(self) -> str:
        """One clause: the ceiling needed, with the level, alpha_generation, bound and ``n``."""
        where = (
            f"confidence_level {self.confidence_level:g} (alpha_gen {self.alpha_generation:.3g}, miss bound "
            f"{self.miss_bound:.3g}, n = {self.n})"
        )
        if self.ceiling is None:
            return f"{where}: no flagged generator threshold even without a miss (too few questions)"
        return (
            f"{where}: a coverage ceiling >= {self.ceiling:.3f} (misses <= {self.max_misses} of {self.n} for the flag, "
            f"a miss rate <= {self.miss_bound:.3g} for its guarantee)"
        )


def _share_of(n: int, alpha_gen: float, bound: float) -> tuple[int | None, float | None]:
    """``(m_max, highest miss share)`` of a flagged generator threshold (``None`` without a rank)."""
    rank = flagged_rank(n, alpha_gen, bound)
    if rank is None:
        return None, None
    return rank.max_misses, min(bound, rank.max_misses / n)


def generator_need(n: int, confidence_level: float, split: SplitOptions) -> GeneratorNeed:
    """The coverage ceiling a flagged generator threshold of ``n`` questions needs at ``confidence_level``.

    ``split`` gives ``alpha_generation`` (:func:`generator_share`; HMP has no miss bound and is
    treated as Bonferroni at its generator level) and the bound: ``generator_miss_bound`` when a number,
    the best bound below ``alpha_generation`` for ``"held-out"``, else the default ``alpha_generation / 2``.

    Examples
    --------
    >>> need = generator_need(195, 0.3, SplitOptions(alpha_retrieval=0.1, generator_miss_bound=0.5))
    >>> need.alpha_generation, need.miss_bound, need.max_misses, round(need.ceiling, 3)
    (0.6, 0.5, 106, 0.5)
    """
    alpha = alpha_from_confidence_level(confidence_level)
    a_gen = generator_share(alpha, split)
    if split.optimise:
        a_gen = a_gen * (1 - 1e-3)  # the optimiser's upper end
    bound = split.generator_miss_bound
    if bound == HELD_OUT:
        candidates = [b * a_gen for b in _HELD_OUT_SHARES]
    else:
        candidates = [check_miss_bound(None if bound is None else float(bound), a_gen)]
    best: tuple[float, float, int | None] = (-1.0, candidates[0], None)
    for b in candidates:
        m_max, share = _share_of(n, a_gen, b)
        if share is not None and share > best[0]:
            best = (share, b, m_max)
    share, b, m_max = best
    return GeneratorNeed(confidence_level, a_gen, b, n, m_max, None if share < 0 else 1.0 - share)


def highest_level(ceiling: float, n: int, split: SplitOptions) -> GeneratorNeed | None:
    """The highest confidence level (0.01 steps) whose generator need a ``ceiling`` meets, or ``None``.

    Examples
    --------
    >>> highest_level(0.46, 195, SplitOptions(optimise=True)) is None  # default bound alpha_gen / 2: none
    True
    >>> highest_level(0.46, 195, SplitOptions(optimise=True, generator_miss_bound="held-out")).confidence_level
    0.42
    """
    for level in LEVEL_GRID:
        try:
            need = generator_need(n, level, split)
        except ConformalError:  # a fixed alpha_retrieval or bound above this level's alpha
            continue
        if need.ceiling is not None and ceiling >= need.ceiling - 1e-12:
            return need
    return None


def reach_line(n: int, confidence_level: float, split: SplitOptions, ceiling: float | None = None) -> str:
    """The up-front line: the rule, what the level needs and, given an estimated ``ceiling``, the levels in reach.

    Examples
    --------
    >>> reach_line(195, 0.3, SplitOptions(optimise=True, generator_miss_bound="held-out"), 0.46).split(": ")[0]
    "generator reach under rule 'pool-miss-2'"
    """
    try:
        need = generator_need(n, confidence_level, split).describe()
    except ConformalError as exc:
        need = f"confidence_level {confidence_level:g}: {exc}"
    line = f"generator reach under rule {current_threshold_rule()!r}: {need}"
    if ceiling is None or math.isnan(ceiling):
        return line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        top = highest_level(ceiling, n, split)
    reach = (
        "no confidence level"
        if top is None
        else f"confidence levels up to {top.confidence_level:g} "
        f"(alpha_gen {top.alpha_generation:.3g}, miss bound {top.miss_bound:.3g})"
    )
    return f"{line}; a ceiling of {ceiling:.2f} reaches {reach}"
