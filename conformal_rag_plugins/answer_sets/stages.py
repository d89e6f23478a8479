"""Framework-neutral end-to-end calibration: retrieval scores + generator scores -> AnswerSetCalibration.

Both stages are calibrated on the same questions, and the generator of each question on
the gold chunk that defines its retrieval score (the best-ranked gold chunk in the pool;
the first gold chunk for a miss). That is what the union bound (Bonferroni, PAC) and the
harmonic-mean proof need: one true (chunk, answer) pair per question, scored by both stages.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.clustering import GENERATOR_SCORES
from ..core.errors import CalibrationError, CoverageCeilingWarning
from ..core.validation import check_alpha
from ..datasets.examples import CalibrationExample, split_examples
from ..retrieval.calibration import RetrievalCalibration
from ..runtime.caller_warning import warn_at_caller
from .calibration import AnswerSetCalibration, check_answer_set_request
from .engine import SampleFn, acalibrate_generation, coverage_report
from .gold import GoldChunk, defining_gold, references_of
from .identity import live_generator
from .split_optimisation import optimise_split_on_host

__all__ = [
    "DEFAULT_CLUSTERING",
    "GoldChunk",
    "HostHooks",
    "acalibrate_end_to_end",
    "align_stages",
    "calibrate_stages",
    "defining_gold",
    "references_of",
    "with_generator_score",
]

logger = logging.getLogger("conformal_rag_plugins")
DEFAULT_CLUSTERING: dict[str, Any] = {"method": "rougeL", "tau": 0.7}


def with_generator_score(clustering: dict[str, Any] | None, generator_score: str | None) -> dict[str, Any]:
    """The clustering record with its generator score (``"frequency"`` unless set), checked.

    Examples
    --------
    >>> with_generator_score(None, "likelihood")
    {'method': 'rougeL', 'tau': 0.7, 'score': 'likelihood'}
    """
    out = dict(clustering or DEFAULT_CLUSTERING)
    score = generator_score or out.get("score", "frequency")
    if score not in GENERATOR_SCORES:
        raise CalibrationError(f"generator_score must be one of {GENERATOR_SCORES}, got {score!r}.")
    out["score"] = score
    return out


def align_stages(
    retrieval: RetrievalCalibration, examples: Sequence[CalibrationExample]
) -> tuple[RetrievalCalibration, list[CalibrationExample]]:
    """Restrict the retrieval stage and the examples to the questions they share, in the same order.

    The retrieval calibration records a digest of each of its questions
    (``question_ids_``); the generator is then scored on exactly those questions
    found among ``examples``, and the retrieval stage keeps only their scores.
    """
    if retrieval.risk_ != "miscoverage":
        raise CalibrationError(
            "Answer sets need a retrieval stage that controls miscoverage, but this one controls "
            f"{retrieval.risk_!r}; calibrate the retrieval with control='coverage'."
        )
    if not retrieval.question_ids_:
        raise CalibrationError(
            "This retrieval calibration does not record its questions (it was made from bare observations or by "
            "an older version), so the generator cannot be calibrated on the same questions. Re-calibrate the "
            "retrieval stage with calibrate_retriever(...) or leave retrieval_calibration=None."
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
            "None of the examples were used to calibrate retrieval_calibration: both stages must be calibrated on "
            "the same questions. Pass the examples the retrieval calibration was made with."
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
    generator: dict[str, Any] | None = None,
) -> AnswerSetCalibration:
    """Score the generator on each example (aligned with ``retrieval``) and combine the stages.

    ``examples`` must be the retrieval calibration's questions in its order (see
    :func:`align_stages`); ``gold_text(example)`` gives the text of the chunk that
    defines the example's retrieval score. ``generator`` is the record of the LLM,
    sampling settings and embedder behind ``sample`` (:func:`~.identity.generator_record`),
    kept in the calibration and compared at query time.
    """
    alpha = 1.0 - check_alpha(confidence_level, "confidence_level")
    clustering = dict(clustering or DEFAULT_CLUSTERING)
    if retrieval.question_ids_ and [ex.digest for ex in examples] != list(retrieval.question_ids_):
        raise CalibrationError(
            "The generator examples are not the retrieval calibration's questions in its order: both stages must "
            "be calibrated on the same questions (use align_stages)."
        )
    scores = await acalibrate_generation(
        examples,
        gold_text,
        sample,
        n_samples=n_samples,
        clustering=clustering,
        match_threshold=match_threshold,
        progress=progress,
        embed=embed,
        references=references_of,
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
        question_ids=[ex.digest for ex in examples],
        generator=generator,
    )
    report = coverage_report(scores, cal.alpha_generation_, threshold_finite=cal.generator_reachable_)
    logger.warning("Generator stage: %s", report)
    if not cal.guaranteed_:
        # run by run_sync, a fixed stacklevel would name asyncio's event loop: name the user's line
        warn_at_caller(
            f"{cal.reason_} (generator coverage ceiling {cal.coverage_ceiling_:.2f}, retrieval misses "
            f"{cal.retrieval_.n_misses_} of {cal.retrieval_.n_calibration_}).",
            CoverageCeilingWarning,
        )
    return cal


@dataclass(frozen=True)
class HostHooks:
    """What a framework adapter supplies to :func:`calibrate_stages`.

    ``identity()`` describes the LLM and sampler behind ``sample``
    (:meth:`~.sampler.AnswerSampler.identity`) and ``embedding_identity()`` the embedding
    model, asked only when answers are clustered by embedding cosine; both are recorded
    in the calibration (without ``identity`` nothing is, and queries warn that they cannot check).
    """

    fetch: Callable[[str], Any]
    texts_for: Callable[[list[str]], dict[str, str]]
    calibrate_retrieval: Callable[[list[CalibrationExample]], RetrievalCalibration]
    sample: SampleFn
    model: str
    run: Callable[[Any], Any]
    identity: Callable[[], dict[str, Any]] | None = None
    embedding_identity: Callable[[], dict[str, Any] | None] | None = None

    def generator(self, clustering: dict[str, Any]) -> dict[str, Any] | None:
        """The generator record of this host for ``clustering`` (``None`` without ``identity``)."""
        if self.identity is None:
            return None
        return live_generator(self.identity(), clustering, self.embedding_identity)


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
    generator_score: str | None = None,
) -> AnswerSetCalibration:
    """The body of both frameworks' ``calibrate_answer_sets`` (optional BO split, then both stages).

    Every request is checked before any LLM call (:func:`check_answer_set_request`).
    With ``optimise_split`` a seeded ``optimisation_fraction`` of the examples chooses the
    split of alpha (or the HMP weight) and is never used for the final thresholds; a
    ``retrieval_calibration`` given by the user must not contain any of those questions.
    """
    examples = list(examples)
    if not examples:
        raise CalibrationError("No calibration examples were given; pass labelled questions.")
    clustering = with_generator_score(clustering, generator_score)
    alpha = 1.0 - check_alpha(confidence_level, "confidence_level")
    opt: list[CalibrationExample] = []
    if optimise_split:
        if not 0.0 < optimisation_fraction < 1.0:
            raise CalibrationError(f"optimisation_fraction must lie in (0, 1), got {optimisation_fraction!r}.")
        opt, examples = split_examples(examples, (optimisation_fraction, 1 - optimisation_fraction), seed=random_state)
    check_answer_set_request(
        round(alpha, 12),
        method=method,
        alpha_retrieval=None if optimise_split else alpha_retrieval,
        delta=delta,
        hmp_weight=None if optimise_split else hmp_weight,
        n_samples=n_samples,
        n_questions=len(examples),
    )
    if retrieval_calibration is not None and opt:
        used = set(retrieval_calibration.question_ids_)
        if not used:
            raise CalibrationError(
                "optimise_split=True with a retrieval_calibration that does not record its questions: the "
                "optimisation questions cannot be checked to be disjoint from it. Re-calibrate the retrieval stage "
                "with this version, or pass retrieval_calibration=None."
            )
        overlap = sum(1 for ex in opt if ex.digest in used)
        if overlap:
            raise CalibrationError(
                f"{overlap} of the {len(opt)} optimisation questions were used to calibrate retrieval_calibration: "
                "the split of alpha would be tuned on calibration data, which voids the guarantee. Calibrate the "
                "retrieval stage on questions disjoint from the optimisation split (same random_state and "
                "optimisation_fraction), or pass retrieval_calibration=None."
            )
    retrieval = retrieval_calibration or hooks.calibrate_retrieval(examples)
    retrieval, aligned = align_stages(retrieval, examples)
    optimisation = None
    if opt:
        optimisation = optimise_split_on_host(
            opt,
            hooks.fetch,
            hooks.texts_for,
            hooks.sample,
            hooks.run,
            alpha=round(alpha, 12),
            method=method,
            family=retrieval.score_family_,
            pool_size=retrieval.pool_size_,
            n_samples=n_samples,
            clustering=clustering,
            match_threshold=match_threshold,
            delta=delta,
            bo_calls=bo_calls,
            random_state=random_state,
            embed=embed,
            progress=progress,
        )
        alpha_retrieval = optimisation.get("alpha_retrieval", alpha_retrieval)
        hmp_weight = optimisation.get("hmp_weight", hmp_weight)
    gold = {ex.digest: defining_gold(ex, hooks.fetch(ex.question), hooks.texts_for) for ex in aligned}
    return hooks.run(
        acalibrate_end_to_end(
            retrieval,
            aligned,
            lambda ex: gold[ex.digest].text,
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
            generator=hooks.generator(clustering),
        )
    )
