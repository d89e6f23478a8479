"""A small seeded pilot that says, before the full answer-set calibration, whether its target is in reach.

The generator stage can cover at most its *coverage ceiling*: the share of questions on which some
sampled answer cluster matches a reference (the coverage of an infinite threshold). A target above
the ceiling cannot be guaranteed, however many questions are calibrated. The pilot samples a few
questions, estimates the ceiling with a one-sided Clopper-Pearson upper bound, and stops with
:class:`~conformal_rag_plugins.core.errors.UnreachableTargetError` when even that bound lies below
the level the generator stage needs.

Statistical care: the pilot questions are removed from the calibration (and recorded), because the
decision to continue depends on them; the thresholds are computed on the other questions only,
which are independent of that decision, so the conformal guarantee holds conditionally on
continuing, exactly as without a pilot.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..core.binomial import clopper_pearson_upper
from ..core.errors import CoverageCeilingWarning, UnreachableTargetError
from ..core.quantile import current_threshold_rule
from ..core.validation import alpha_from_confidence_level
from ..runtime.caller_warning import warn_at_caller
from .options import HELD_OUT, PilotOptions, SplitOptions
from .reach import GeneratorNeed, generator_need, generator_share
from .reach import highest_level as rule_highest_level

logger = logging.getLogger("conformal_rag_plugins")

T = TypeVar("T")

LIBRARY_ADVICE = (
    "Lower confidence_level, give the generator more of alpha (SplitOptions(alpha_retrieval=...) or "
    "optimise=True), or use a stronger LLM, prompt or more samples; or turn the pilot off with "
    "SamplingOptions(pilot=None)."
)
"""How a library user changes the level or turns the pilot off (the end of the error message)."""


def highest_level(ceiling: float, split: SplitOptions) -> float:
    """The highest end-to-end confidence level whose generator *share* a ``ceiling`` covers under ``split``.

    The inverse of :func:`generator_share` (``1 - share(alpha) = ceiling``); at most 0 means none. A
    necessary condition only: the flag rule needs more (:func:`~.reach.highest_level`, which the pilot
    uses once it knows the calibration size).

    >>> round(highest_level(0.9, SplitOptions()), 3), round(highest_level(0.9, SplitOptions(optimise=True)), 3)
    (0.8, 0.9)
    """
    if split.optimise:
        return ceiling
    if split.method == "hmp":
        w = 0.5 if split.hmp_weight is None else float(split.hmp_weight)
        return 1 - (1 - ceiling) / (1 - w / 2)
    if split.alpha_retrieval is None:
        return 2 * ceiling - 1
    return ceiling - float(split.alpha_retrieval)


@dataclass(frozen=True)
class PilotEstimate:
    """What a pilot found: ``n_hits`` of ``n_questions`` had a correct sampled cluster.

    With ``n_calibration`` (the questions left to calibrate) the target is what the current flag rule
    needs of the generator (:func:`~.reach.generator_need`: its misses within the flagged rank's
    allowance and its miss bound); without it (0), only ``1 -`` the generator's share of alpha, a
    necessary condition.

    >>> est = PilotEstimate(n_questions=5, n_hits=0, confidence=0.95, confidence_level=0.8, split=SplitOptions())
    >>> round(est.ceiling, 2), round(est.upper_bound, 4), est.unreachable
    (0.0, 0.4507, True)
    >>> PilotEstimate(5, 2, 0.95, 0.6, SplitOptions(), n_calibration=55).target  # 1 - alpha_gen / 2, not 0.8
    0.9
    """

    n_questions: int
    n_hits: int
    confidence: float
    confidence_level: float
    split: SplitOptions
    question_ids: tuple[str, ...] = ()
    n_calibration: int = 0

    @property
    def need(self) -> GeneratorNeed | None:
        """What the flag rule needs of the generator with ``n_calibration`` questions (``None``: unknown)."""
        if self.n_calibration <= 0:
            return None
        return generator_need(self.n_calibration, self.confidence_level, self.split)

    @property
    def ceiling(self) -> float:
        """The estimated coverage ceiling (share of pilot questions with a correct cluster)."""
        return self.n_hits / self.n_questions

    @property
    def upper_bound(self) -> float:
        """One-sided Clopper-Pearson upper bound of the ceiling at :attr:`confidence`."""
        return clopper_pearson_upper(self.n_hits, self.n_questions, self.confidence)

    @property
    def target(self) -> float:
        """The coverage ceiling the generator stage needs at the requested level (1.0: no flag at all)."""
        need = self.need
        if need is not None:
            return 1.0 if need.ceiling is None else need.ceiling
        return 1.0 - generator_share(alpha_from_confidence_level(self.confidence_level), self.split)

    @property
    def unreachable(self) -> bool:
        """Clearly out of reach: even the upper bound of the ceiling lies below the target (or no flag is possible)."""
        need = self.need
        return self.upper_bound < self.target or (need is not None and need.ceiling is None)

    @property
    def likely_unreachable(self) -> bool:
        """The estimate lies below the target (the upper bound may not)."""
        return self.ceiling < self.target

    def reachable_levels(self) -> str:
        """The end-to-end confidence levels in reach under this split, at the estimate and at the upper bound."""

        def level(c: float) -> str:
            if self.n_calibration > 0:
                need = rule_highest_level(c, self.n_calibration, self.split)
                return "none" if need is None else f"up to {need.confidence_level:.2f}"
            top = highest_level(c, self.split)
            return f"up to {top:.2f}" if top > 0 else "none"

        if self.n_calibration > 0:  # the most the rule allows: an optimised split and a held-out generator bound
            best = SplitOptions(method=self.split.method, delta=self.split.delta, optimise=True,
                                generator_miss_bound=HELD_OUT)  # fmt: skip
            lenient = rule_highest_level(self.upper_bound, self.n_calibration, best)
            reach = "none" if lenient is None else f"up to {lenient.confidence_level:.2f}"
            any_split = "" if self.split == best else (
                f"; with SplitOptions(optimise=True, generator_miss_bound='held-out'), {reach} at the upper bound"
            )  # fmt: skip
        elif self.split.optimise:
            any_split = ""
        else:
            any_split = f"; with all of alpha on the generator, below {self.upper_bound:.2f}"
        return (
            f"confidence_level {level(self.upper_bound)} at the upper bound ({level(self.ceiling)} at the estimate)"
            f"{any_split}"
        )

    def _rule(self) -> str:
        if self.split.optimise:
            return f"{self.split.method}, alpha split chosen by optimisation"
        if self.split.method == "hmp":
            return f"hmp, weight {0.5 if self.split.hmp_weight is None else self.split.hmp_weight:g}"
        a_ret = self.split.alpha_retrieval
        return f"{self.split.method}, " + ("equal split" if a_ret is None else f"alpha_retrieval {a_ret:g}")

    def _flag(self) -> str:
        """The flag rule's numbers behind the target (empty without ``n_calibration``)."""
        need = self.need
        if need is None:
            return ""
        if need.ceiling is None:
            return f"; no flagged generator threshold at alpha_gen {need.alpha_generation:.3g} with {need.n} questions"
        return (
            f"; flag rule {current_threshold_rule()!r}: alpha_gen {need.alpha_generation:.3g}, generator miss bound "
            f"{need.miss_bound:.3g}, at most {need.max_misses} misses of {need.n}"
        )

    def summary(self) -> str:
        """One line: the estimate, its bound, the target and the reachable levels."""
        pct = f"{self.confidence:.0%}"
        return (
            f"pilot: a correct answer among the samples on {self.n_hits} of {self.n_questions} questions: coverage "
            f"ceiling ~{self.ceiling:.2f} ({pct} upper bound {self.upper_bound:.2f}); confidence_level="
            f"{self.confidence_level:g} needs {self.target:.2f} ({self._rule()}{self._flag()}); reachable: "
            f"{self.reachable_levels()}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (saved in the calibration's ``optimisation_["pilot"]``)."""
        return {
            "n_questions": self.n_questions,
            "n_hits": self.n_hits,
            "ceiling": self.ceiling,
            "upper_bound": self.upper_bound,
            "confidence": self.confidence,
            "target": self.target,
            "n_calibration": self.n_calibration,
            "question_ids": list(self.question_ids),
        }


def pilot_size(n_examples: int, options: PilotOptions, needed: int = 0) -> int:
    """How many pilot questions to take from ``n_examples`` (0: no pilot).

    At most ``options.questions`` and ``max_fraction`` of the examples, leaving at least ``needed``
    for the calibration; fewer than ``min_questions`` means none.

    >>> pilot_size(40, PilotOptions(), 18), pilot_size(20, PilotOptions(), 18), pilot_size(40, PilotOptions(0), 18)
    (5, 0, 0)
    """
    if not options.enabled:
        return 0
    k = min(int(options.questions), math.floor(options.max_fraction * n_examples))
    k = min(k, n_examples - needed)
    return k if k >= max(1, int(options.min_questions)) else 0


def draw_pilot(items: Sequence[T], size: int, random_state: int) -> tuple[list[T], list[T]]:
    """Seeded ``size`` pilot items and the rest, the rest in their given order.

    >>> draw_pilot(list("abcdef"), 2, 0)[1]
    ['a', 'b', 'e', 'f']
    """
    if size <= 0:
        return [], list(items)
    chosen = set(np.random.default_rng(random_state).permutation(len(items))[:size].tolist())
    pilot = [x for i, x in enumerate(items) if i in chosen]
    rest = [x for i, x in enumerate(items) if i not in chosen]
    return pilot, rest


def judge_pilot(estimate: PilotEstimate, *, advice: str = LIBRARY_ADVICE) -> PilotEstimate:
    """Log the pilot's line; raise when the target is clearly out of reach, warn when it is likely so.

    Raises
    ------
    UnreachableTargetError
        The upper bound of the ceiling lies below the generator's target; the message names the
        estimate, its bound, the reachable levels and ``advice``.
    """
    line = estimate.summary()
    logger.warning("Answer-set %s", line)
    if estimate.unreachable:
        raise UnreachableTargetError(
            f"The target is out of reach, stopped before the full calibration. {line}. {advice}", estimate
        )
    if estimate.likely_unreachable:
        warn_at_caller(
            f"The target is probably out of reach ({line}); {estimate.n_questions} pilot questions cannot tell for "
            f"sure, so the calibration goes on. {advice}",
            CoverageCeilingWarning,
        )
    return estimate
