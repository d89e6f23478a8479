"""Framework-neutral end-to-end calibration: retrieval scores + generator scores -> AnswerSetCalibration.

Each question's generator is calibrated on the gold chunk defining its retrieval score (best-ranked
in the pool; first gold for a miss): the union bound and the HMP proof need one true
(chunk, answer) pair per question, scored by both stages.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..core.errors import CalibrationError, CoverageCeilingWarning, UncheckedGeneratorWarning
from ..core.validation import alpha_from_confidence_level
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..runtime.caller_warning import warn_at_caller
from .calibration import AnswerSetCalibration, StageProvenance
from .engine import GeneratorStage, acalibrate_generation, coverage_report
from .gold import references_of
from .options import DEFAULT_CLUSTERING, SplitOptions

logger = logging.getLogger("conformal_rag_plugins")


def align_stages(
    retrieval: RetrievalCalibration, examples: Sequence[CalibrationExample]
) -> tuple[RetrievalCalibration, list[CalibrationExample]]:
    """Restrict the retrieval stage (by ``question_ids_``) and the examples to their shared questions, same order."""
    if retrieval.risk_ != "miscoverage":
        raise CalibrationError(
            "Answer sets need a retrieval stage that controls miscoverage, but this one controls "
            f"{retrieval.risk_!r}; calibrate the retrieval with control='coverage'."
        )
    if not retrieval.question_ids_:
        raise CalibrationError(
            "This retrieval calibration does not record its questions (it was made from bare observations or by "
            "an older version), so the generator cannot be calibrated on the same questions. Re-calibrate the "
            "retrieval stage with calibrate_retriever(...) or leave RetrievalStageOptions(calibration=None)."
        )
    by_digest: dict[str, list[CalibrationExample]] = {}
    for ex in examples:
        by_digest.setdefault(ex.digest, []).append(ex)
    keep_idx, aligned = [], []
    for i, qid in enumerate(retrieval.question_ids_):
        bucket = by_digest.get(qid)
        if bucket:
            keep_idx.append(i)
            aligned.append(bucket.pop(0))
    if not aligned:
        raise CalibrationError(
            "None of the examples were used to calibrate the given retrieval calibration: both stages must be "
            f"calibrated on the same questions. {_why_none_shared(retrieval, examples)}Pass the examples the "
            "retrieval calibration was made with, or a subset of them (a question is matched by its id and text, "
            "never by its gold ids, so document-id gold is fine)."
        )
    dropped_ret = len(retrieval.question_ids_) - len(aligned)
    dropped_ex = len(examples) - len(aligned)
    if dropped_ret or dropped_ex:
        logger.warning(
            "Both stages use the %d questions they share: %d retrieval-calibration question(s) are not among the "
            "examples and %d example(s) are not in the retrieval calibration.",
            len(aligned),
            dropped_ret,
            dropped_ex,
        )
    if dropped_ret:
        scores = tuple(retrieval.scores_[i] for i in keep_idx)
        retrieval = replace(
            retrieval,
            scores_=scores,
            question_ids_=tuple(retrieval.question_ids_[i] for i in keep_idx),
            gold_ranks_=tuple(retrieval.gold_ranks_[i] for i in keep_idx) if retrieval.gold_ranks_ else (),
            n_calibration_=len(scores),
            n_misses_=sum(1 for s in scores if math.isinf(s)),
        )
        retrieval = replace(retrieval, threshold_=retrieval.recomputed_threshold())
    return retrieval, aligned


def _why_none_shared(retrieval: RetrievalCalibration, examples: Sequence[CalibrationExample]) -> str:
    """A hint when no question is shared: the ids differ (same texts), or the calibration's questions were split."""
    recorded = set(retrieval.question_ids_)
    other_ids = sum(1 for ex in examples if ex.id is not None and replace(ex, id=None).digest in recorded)
    if other_ids:
        return (
            f"{other_ids} example(s) have the same question text as a calibration question but another id "
            "(the retrieval stage was calibrated on examples without ids): give both stages the same examples. "
        )
    if retrieval.selection_.get("optimisation_question_ids"):
        return (
            f"The retrieval calibration used {len(recorded)} questions (its optimisation split chose the host and is "
            "not among them). "
        )
    return f"The retrieval calibration recorded {len(recorded)} questions, none of these {len(examples)}. "


async def acalibrate_end_to_end(
    retrieval: RetrievalCalibration,
    examples: Sequence[CalibrationExample],
    gold_text: Callable[[CalibrationExample], str | None],
    stage: GeneratorStage,
    *,
    confidence_level: float,
    split: SplitOptions,
    optimisation: dict[str, Any] | None = None,
) -> AnswerSetCalibration:
    """Score the generator on each example (aligned with ``retrieval``) and combine the stages.

    ``split``'s stage miss bounds must be numbers or ``None`` (half the stage's alpha), fixed without
    these examples. A calibration that is not guaranteed warns at the caller's line:
    :class:`CoverageCeilingWarning` when its rule or threshold rule withholds the guarantee,
    :class:`UncheckedGeneratorWarning` when ``stage`` has no generator record (queries could not check the
    generator).
    """
    alpha = alpha_from_confidence_level(confidence_level)
    stage = replace(stage, clustering=dict(stage.clustering or DEFAULT_CLUSTERING))
    if retrieval.question_ids_ and [ex.digest for ex in examples] != list(retrieval.question_ids_):
        raise CalibrationError(
            "The generator examples are not the retrieval calibration's questions in its order: both stages must "
            "be calibrated on the same questions (use align_stages)."
        )
    scores = await acalibrate_generation(examples, gold_text, stage, references=references_of)
    cal = AnswerSetCalibration.from_stages(
        retrieval,
        scores,
        alpha=alpha,
        split=split,
        n_samples=stage.n_samples,
        model=stage.model,
        clustering={**stage.clustering, "match": "rouge1", "match_threshold": stage.match_threshold},
        provenance=StageProvenance(
            question_ids=[ex.digest for ex in examples], optimisation=optimisation, generator=stage.generator
        ),
    )
    report = coverage_report(scores, cal.alpha_generation_, threshold_finite=cal.generator_reachable_)
    logger.warning("Generator stage: %s", report)
    # run by run_sync, a fixed stacklevel would name asyncio's event loop: name the user's line
    if cal.rule_reason_:
        warn_at_caller(
            f"{cal.rule_reason_} (generator coverage ceiling {cal.coverage_ceiling_:.2f}, retrieval misses "
            f"{cal.retrieval_.n_misses_} of {cal.retrieval_.n_calibration_}).",
            CoverageCeilingWarning,
        )
    if cal.unchecked_reason_:
        warn_at_caller(cal.unchecked_reason_, UncheckedGeneratorWarning)
    return cal
