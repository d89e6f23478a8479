"""The stages' pool-miss bounds of an answer-set calibration: given, or chosen on held-out questions.

A flagged threshold (:func:`~conformal_rag_plugins.core.quantile.flagged_rank`) holds given its flag for
any miss bound ``b`` fixed independently of the calibration questions, when the stage misses
independently at a rate ``<= b``. The generator stage "misses" a question when no sampled answer is
correct, so a weak generator (ceiling 0.46) misses more than the default ``alpha_gen / 2`` and keeps
``+inf``. A bound chosen on the optimisation questions (never calibration questions) keeps the proof:
``b`` is the one-sided Clopper-Pearson upper bound of the miss share there, so the true rate lies
below it with probability ``confidence`` over the optimisation draw. Then every split of alpha with
``alpha_stage > b`` for both stages is valid; the others cannot be flagged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.binomial import clopper_pearson_upper
from ..core.errors import CalibrationError
from .options import HELD_OUT, MissBound

StageBounds = tuple[float | None, float | None]
"""The retrieval and generator stages' bounds as the rule takes them (``None``: half the stage's alpha)."""


def held_out_bound(misses: int, n: int, confidence: float) -> float:
    """The miss bound a stage gets from ``misses`` of ``n`` held-out questions: their Clopper-Pearson upper bound.

    Examples
    --------
    >>> round(held_out_bound(32, 60, 0.95), 3)
    0.644
    """
    if n < 1:
        raise CalibrationError("A held-out miss bound needs at least one optimisation question.")
    return float(clopper_pearson_upper(int(misses), int(n), confidence))


def resolve_bounds(
    settings: tuple[MissBound, MissBound],
    scores: tuple[Sequence[float], Sequence[float]],
    confidence: float,
) -> StageBounds:
    """Each stage's bound: a number or ``None`` as given, :data:`~.options.HELD_OUT` from its held-out ``scores``.

    ``scores`` are the optimisation questions' retrieval and generator scores (``+inf``: a miss).

    Examples
    --------
    >>> inf = float("inf")
    >>> b = resolve_bounds((None, "held-out"), ([0.1] * 10, [-0.5] * 6 + [inf] * 4), 0.95)
    >>> b[0], round(b[1], 3)
    (None, 0.696)
    """
    out: list[float | None] = []
    for setting, stage in zip(settings, scores, strict=True):
        if setting == HELD_OUT:
            out.append(held_out_bound(sum(1 for s in stage if math.isinf(s)), len(stage), confidence))
        else:
            out.append(None if setting is None else float(setting))
    return out[0], out[1]


def fixed_bounds(settings: tuple[MissBound, MissBound]) -> StageBounds:
    """The bounds known before any question is scored (``"held-out"`` ones are not: ``None``).

    >>> fixed_bounds((0, "held-out"))
    (0.0, None)
    """
    return tuple(None if s is None or s == HELD_OUT else float(s) for s in settings)  # type: ignore[return-value]


def feasible_retrieval_share(alpha: float, bounds: StageBounds) -> tuple[float, float] | None:
    """The open interval of ``alpha_retrieval`` that leaves each stage's alpha above its bound (``None``: empty).

    A ``None`` bound (half the stage's alpha) never constrains the split.

    Examples
    --------
    >>> feasible_retrieval_share(0.7, (None, 0.6)), feasible_retrieval_share(0.7, (0.2, 0.6))
    ((0.0, 0.09999999999999998), None)
    """
    low = 0.0 if bounds[0] is None else float(bounds[0])
    high = alpha if bounds[1] is None else alpha - float(bounds[1])
    return (low, high) if low < high else None


def infeasible_message(alpha: float, n: int, misses: tuple[int, int], bounds: StageBounds, confidence: float) -> str:
    """Why no split of ``alpha`` can be flagged on the optimisation questions, with the numbers.

    >>> infeasible_message(0.3, 60, (2, 40), (None, 0.78), 0.95).split(":")[0]
    'No split of alpha = 0.3 can be flagged guaranteed on the 60 optimisation questions'
    """

    def bound(b: float | None) -> str:
        return "half its alpha" if b is None else f"{b:.3g}"

    return (
        f"No split of alpha = {alpha:g} can be flagged guaranteed on the {n} optimisation questions: the retrieval "
        f"stage missed {misses[0]} and the generator {misses[1]} of them (generator ceiling {1 - misses[1] / n:.2f}); "
        f"miss bounds: retrieval {bound(bounds[0])}, generator {bound(bounds[1])} (held-out bounds at "
        f"{confidence:g} confidence), and each stage's alpha must exceed its bound and leave a finite flagged "
        "threshold. The calibration goes on with the equal split and will not be guaranteed. Lower "
        "confidence_level, use a stronger generator or more samples, or a larger pool."
    )
