"""Framework-neutral end-to-end calibration: retrieval scores + generator scores -> AnswerSetCalibration."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..calibration.answer_sets import AnswerSetCalibration
from ..calibration.examples import CalibrationExample, split_examples
from ..calibration.retrieval import RetrievalCalibration
from ..core.validation import check_alpha
from .engine import SampleFn, acalibrate_generation, coverage_report

__all__ = [
    "DEFAULT_CLUSTERING",
    "HostHooks",
    "acalibrate_end_to_end",
    "bo_choice",
    "calibrate_stages",
    "gold_text_lookup",
]

logger = logging.getLogger("conformal_rag_plugins")
DEFAULT_CLUSTERING: dict[str, Any] = {"method": "rougeL", "tau": 0.7}


def gold_text_lookup(texts: Mapping[str, str]) -> Callable[[CalibrationExample], str | None]:
    """``example -> text of its first gold chunk`` (gold texts first, then ids)."""

    def find(ex: CalibrationExample) -> str | None:
        if ex.gold_texts:
            return ex.gold_texts[0]
        return next((texts[g] for g in ex.gold_ids if g in texts), None)

    return find


async def acalibrate_end_to_end(
    retrieval: RetrievalCalibration,
    examples: Sequence[CalibrationExample],
    gold_text: Callable[[CalibrationExample], str | None],
    sample: SampleFn,
    *,
    confidence_level: float,
    n_samples: int,
    model: str,
    method: str = "bonferroni",
    alpha_retrieval: float | None = None,
    delta: float | None = None,
    hmp_weight: float | None = None,
    clustering: dict[str, Any] | None = None,
    match_threshold: float = 0.3,
    progress: bool = True,
    optimisation: dict[str, Any] | None = None,
    embed: Any = None,
) -> AnswerSetCalibration:
    """Score the generator on each example's gold chunk and combine with the retrieval stage."""
    alpha = 1.0 - check_alpha(confidence_level, "confidence_level")
    clustering = dict(clustering or DEFAULT_CLUSTERING)
    answerable = [ex for ex in examples if ex.answers and not ex.is_impossible]
    scores = await acalibrate_generation(
        answerable,
        gold_text,
        sample,
        n_samples=n_samples,
        clustering=clustering,
        match_threshold=match_threshold,
        progress=progress,
        embed=embed,
    )
    cal = AnswerSetCalibration.from_stages(
        retrieval,
        scores,
        alpha=round(alpha, 12),
        method=method,
        alpha_retrieval=alpha_retrieval,
        delta=delta,
        hmp_weight=hmp_weight,
        n_samples=n_samples,
        model=model,
        clustering={**clustering, "match": "rouge1", "match_threshold": match_threshold},
        optimisation=optimisation,
    )
    logger.warning("Generator stage: %s", coverage_report(scores, cal.alpha_generation_))
    return cal


def bo_choice(
    optimisation_examples: Sequence[CalibrationExample],
    fetch: Callable[[str], Any],
    texts: Mapping[str, str],
    sample: SampleFn,
    *,
    confidence_level: float,
    method: str,
    n_samples: int,
    delta: float | None,
    bo_calls: int,
    progress: bool,
) -> dict[str, Any]:
    """Sample the optimisation questions' top chunks and pick the split of alpha by BO on them only."""
    from ..apps.answer_eval import optimise_split, prepare_rows
    from ..apps.sample_rows import build_rows

    alpha = 1.0 - check_alpha(confidence_level, "confidence_level")
    rows = build_rows(optimisation_examples, fetch, texts, sample, progress=progress)
    prepared = prepare_rows(rows, n_samples=n_samples)
    return optimise_split(prepared, round(alpha, 12), method=method, delta=delta or 0.1, bo_calls=bo_calls)


@dataclass(frozen=True)
class HostHooks:
    """What a framework adapter supplies to :func:`calibrate_stages`."""

    fetch: Callable[[str], Any]
    texts_for: Callable[[list[str]], dict[str, str]]
    calibrate_retrieval: Callable[[list[CalibrationExample]], RetrievalCalibration]
    sample: SampleFn
    model: str
    run: Callable[[Any], Any]


def calibrate_stages(
    hooks: HostHooks,
    examples: Sequence[CalibrationExample],
    *,
    retrieval_calibration: RetrievalCalibration | None,
    confidence_level: float,
    method: str,
    alpha_retrieval: float | None,
    delta: float | None,
    hmp_weight: float | None,
    n_samples: int,
    clustering: dict[str, Any] | None,
    match_threshold: float,
    optimise_split: bool,
    optimisation_fraction: float,
    bo_calls: int,
    random_state: int,
    progress: bool,
    embed: Any,
) -> AnswerSetCalibration:
    """The body of both frameworks' ``calibrate_answer_sets`` (optional BO split, then both stages)."""
    examples = list(examples)
    optimisation = None
    if optimise_split:
        opt, examples = split_examples(examples, (optimisation_fraction, 1 - optimisation_fraction), seed=random_state)
        optimisation = bo_choice(
            [ex for ex in opt if ex.answers and not ex.is_impossible],
            hooks.fetch,
            hooks.texts_for(sorted({g for ex in opt for g in ex.gold_ids})),
            hooks.sample,
            confidence_level=confidence_level,
            method=method,
            n_samples=n_samples,
            delta=delta,
            bo_calls=bo_calls,
            progress=progress,
        )
        alpha_retrieval = optimisation.get("alpha_retrieval", alpha_retrieval)
        hmp_weight = optimisation.get("hmp_weight", hmp_weight)
    retrieval = retrieval_calibration or hooks.calibrate_retrieval(examples)
    texts = hooks.texts_for(sorted({g for ex in examples for g in ex.gold_ids}))
    return hooks.run(
        acalibrate_end_to_end(
            retrieval,
            examples,
            gold_text_lookup(texts),
            hooks.sample,
            confidence_level=confidence_level,
            n_samples=n_samples,
            model=hooks.model,
            method=method,
            alpha_retrieval=alpha_retrieval,
            delta=delta,
            hmp_weight=hmp_weight,
            clustering=clustering,
            match_threshold=match_threshold,
            progress=progress,
            optimisation=optimisation,
            embed=embed,
        )
    )
