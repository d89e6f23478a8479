"""Per-group coverage *given the flag* of the end-to-end answer-set rule on a grouped retrieval stage.

Each draw calibrates a Bonferroni :class:`~conformal_rag_plugins.answer_sets.calibration.AnswerSetCalibration`
on fresh synthetic questions from groups of different difficulty: a question of group ``g`` has the
retrieval nonconformity ``U(0, 1) + shift_g`` (its gold chunk is always in the pool) and the generator
score ``-U(0, 1)`` (``-confidence``; every group alike). The retrieval stage is grouped (``group_by``)
and refitted at ``alpha_retrieval`` by
:meth:`~conformal_rag_plugins.answer_sets.calibration.AnswerSetCalibration.retrieval_stage`, as the
``ConformalRetriever`` of the calibration serves it. A query of group ``g`` is then decided by

* ``rule="group"``: :func:`~conformal_rag_plugins.answer_sets.group_rules.group_rule`, the rule the
  synthesizers apply (the group's own retrieval threshold), flagged when that rule is guaranteed;
* ``rule="pooled"``: the rule before issue 41, the pooled ``calibration.rule()`` on the group's set,
  flagged unless the retriever's group threshold lies below the pooled one (the negative control).

A flagged draw contributes the exact coverage of a fresh test question of group ``g`` under its
threshold (``P(U + shift_g <= q_ret)``, and times ``P(-U <= q_gen)`` end to end), so the Monte-Carlo
error comes from the calibration draws only; the figures are means over the flagged draws, as a user
reads the flag per answer. ``tests/evaluation/test_group_answer_set_trials.py`` uses it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.group_rules import group_rule
from ..answer_sets.options import SplitOptions
from ..core.errors import ConformalError, InfiniteThresholdWarning, SmallGroupWarning
from ..core.quantile import conformal_quantile
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.groups import with_groups

_FINGERPRINT = Fingerprint("none", "synthetic", "cosine", "uniform", 1, "cosine")
RULES = ("group", "pooled")


@dataclass(frozen=True)
class GroupFlagTrial:
    """One group's figures over the draws in which its queries were flagged guaranteed.

    ``retrieval`` and ``end_to_end`` are the mean coverages of a fresh question of the group given the
    flag (``nan`` when never flagged), ``*_se`` their standard errors over the flagged draws.
    """

    group: str
    n: int
    shift: float
    draws: int
    flag_rate: float
    retrieval: float
    retrieval_se: float
    end_to_end: float
    end_to_end_se: float


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=float)
    se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else math.nan
    return float(arr.mean()), se


def _calibration(rng: np.random.Generator, labels: Sequence[str], shifts: np.ndarray, alpha: float, a_ret: float):
    ret = tuple(float(x) for x in rng.random(len(labels)) + shifts)
    gen = tuple(float(x) for x in -rng.random(len(labels)))
    plain = RetrievalCalibration(
        conformal_quantile(ret, a_ret), a_ret, "split", "relative", 20, len(ret), 0, ret, _FINGERPRINT
    )
    grouped = with_groups(plain, labels, "group")
    return AnswerSetCalibration.from_stages(
        grouped,
        gen,
        alpha=alpha,
        split=SplitOptions(alpha_retrieval=a_ret),
        n_samples=1,
        model="synthetic",
        clustering={"method": "exact"},
    )


def _served(cal: AnswerSetCalibration, stage: RetrievalCalibration, group: str, rule: str) -> tuple[bool, float]:
    """Whether a query of ``group`` is flagged, and the retrieval threshold its set is decided with."""
    if rule == "group":
        own, q_ret, reason = group_rule(cal, group, stage=stage)
        return bool(own.guaranteed) and not reason, q_ret
    pooled = cal.rule()
    served = float(stage.groups_[group]["threshold"])  # what the group's retriever kept
    below = served < pooled.q_ret and not math.isclose(served, pooled.q_ret)
    return bool(pooled.guaranteed) and not below, min(served, float(pooled.q_ret))


def simulate_grouped_answer_set_flag(
    group_sizes: Sequence[int],
    shifts: Sequence[float],
    alpha: float,
    alpha_retrieval: float,
    *,
    draws: int,
    seed: int = 0,
    rule: str = "group",
) -> list[GroupFlagTrial]:
    """Per group: retrieval and end-to-end coverage given the flag, over ``draws`` seeded calibrations.

    Examples
    --------
    >>> easy, hard = simulate_grouped_answer_set_flag((60, 60), (0.0, 0.5), 0.2, 0.1, draws=5, seed=1)
    >>> easy.group, hard.flag_rate, hard.retrieval >= 0.85
    ('g0', 1.0, True)
    """
    if rule not in RULES:
        raise ConformalError(f"rule must be one of {RULES}, got {rule!r}.")
    if len(group_sizes) != len(shifts):
        raise ConformalError(f"{len(group_sizes)} group sizes but {len(shifts)} shifts: give one shift per group.")
    names = [f"g{i}" for i in range(len(group_sizes))]
    labels = [g for g, size in zip(names, group_sizes, strict=True) for _ in range(size)]
    shift_of = np.array([s for s, size in zip(shifts, group_sizes, strict=True) for _ in range(size)], dtype=float)
    rng = np.random.default_rng(seed)
    ret: dict[str, list[float]] = {g: [] for g in names}
    e2e: dict[str, list[float]] = {g: [] for g in names}
    with warnings.catch_warnings():
        for category in (InfiniteThresholdWarning, SmallGroupWarning):
            warnings.simplefilter("ignore", category)
        for _ in range(draws):
            cal = _calibration(rng, labels, shift_of, alpha, alpha_retrieval)
            stage = cal.retrieval_stage()
            q_gen = float(cal.rule().q_gen)
            for g, shift in zip(names, shifts, strict=True):
                flagged, q_ret = _served(cal, stage, g, rule)
                if not flagged:
                    continue
                covered = float(np.clip(q_ret - shift, 0.0, 1.0))
                ret[g].append(covered)
                e2e[g].append(covered * float(np.clip(1.0 + q_gen, 0.0, 1.0)))
    out = []
    for g, size, shift in zip(names, group_sizes, shifts, strict=True):
        r, r_se = _mean_se(ret[g])
        e, e_se = _mean_se(e2e[g])
        out.append(GroupFlagTrial(g, int(size), float(shift), draws, len(ret[g]) / draws, r, r_se, e, e_se))
    return out
