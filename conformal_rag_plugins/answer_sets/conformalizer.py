"""MAPIE-style estimator of end-to-end answer sets, written once against :class:`~.host.AnswerSetHost`.

Both stages use the same questions; each question's generator is sampled on the gold chunk that
defines its retrieval score (see :mod:`~.stages`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import CalibrationError, NotFittedError
from ..core.validation import DEFAULT_CONFIDENCE_LEVEL, alpha_from_confidence_level
from ..datasets.examples import CalibrationExample, split_examples
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.conformalizer import optimisation_ids
from ..runtime.run_sync import run_sync
from .calibration import AnswerSetCalibration, check_answer_set_request, min_answer_set_questions
from .engine import GeneratorStage, acalibrate_generation
from .gold import GoldChunk, defining_gold, references_of
from .host import AnswerSetHost, Embedding, GeneratorSampler, GoldPreparingHost
from .identity import live_generator
from .miss_bounds import fixed_bounds
from .options import HELD_OUT, ClusteringOptions, RetrievalStageOptions, SamplingOptions, SplitOptions
from .pilot import PilotEstimate, draw_pilot, judge_pilot, pilot_size
from .reach import reach_line
from .split_optimisation import optimise_split_on_host
from .stages import acalibrate_end_to_end, align_stages

logger = logging.getLogger("conformal_rag_plugins")


@dataclass(frozen=True)
class _Plan:
    """Everything decided before the generator stage is sampled: the stages' questions, gold chunks and rule."""

    retrieval: RetrievalCalibration
    examples: list[CalibrationExample]
    gold: dict[str, GoldChunk]
    stage: GeneratorStage
    split: SplitOptions
    optimisation: dict[str, Any] | None


class AnswerSetConformalizer:
    """Calibrate end-to-end answer sets (retrieval stage + generator stage) on a host and its LLM.

    The answer set of a new question contains a correct answer with probability at least
    ``confidence_level`` when ``calibration_.guaranteed_``. The generator stage samples
    ``n_samples`` answers per example from its gold chunk and scores the cluster matching a
    reference, ``+inf`` when none does (kept).

    Parameters
    ----------
    confidence_level : float, default 0.9
        The end-to-end target ``1 - alpha``.
    sampling : SamplingOptions, optional
        Also holds the ``pilot`` (:class:`~.options.PilotOptions`) run before the full calibration.
    split : SplitOptions, optional
        The combination rule and the split of alpha.
    clustering : ClusteringOptions, optional
    retrieval : RetrievalStageOptions, optional
        A retrieval calibration to reuse, or the score family to calibrate one with.

    Attributes
    ----------
    calibration_ : AnswerSetCalibration
        Set by :meth:`conformalize`; reading it before raises
        :class:`~conformal_rag_plugins.core.errors.NotFittedError`.

    Examples
    --------
    >>> conformalizer = AnswerSetConformalizer(0.7, sampling=SamplingOptions(n_samples=5))
    >>> conformalizer.calibration_
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.NotFittedError: This AnswerSetConformalizer is not fitted yet: ...
    >>> cal = conformalizer.conformalize(host, examples)  # doctest: +SKIP
    """

    def __init__(
        self,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
        *,
        sampling: SamplingOptions | None = None,
        split: SplitOptions | None = None,
        clustering: ClusteringOptions | None = None,
        retrieval: RetrievalStageOptions | None = None,
    ) -> None:
        self.confidence_level = confidence_level
        self.sampling = sampling or SamplingOptions()
        self.split = split or SplitOptions()
        self.clustering = clustering or ClusteringOptions()
        self.retrieval = retrieval or RetrievalStageOptions()
        self._calibration: AnswerSetCalibration | None = None

    def __repr__(self) -> str:
        return (
            f"AnswerSetConformalizer(confidence_level={self.confidence_level!r}, sampling={self.sampling!r}, "
            f"split={self.split!r}, clustering={self.clustering!r}, retrieval={self.retrieval!r})"
        )

    @property
    def calibration_(self) -> AnswerSetCalibration:
        """The fitted :class:`AnswerSetCalibration`, or :class:`NotFittedError`."""
        if self._calibration is None:
            raise NotFittedError(
                "This AnswerSetConformalizer is not fitted yet: call conformalize(host, examples) first."
            )
        return self._calibration

    @property
    def retrieval_threshold_(self) -> float:
        """The fitted retrieval-stage threshold."""
        return self.calibration_.retrieval_threshold_

    @property
    def generation_threshold_(self) -> float:
        """The fitted generator-stage threshold."""
        return self.calibration_.generation_threshold_

    def conformalize(self, host: AnswerSetHost, examples: Sequence[CalibrationExample]) -> AnswerSetCalibration:
        """Calibrate both stages on ``host`` with the labelled ``examples``; also kept in ``calibration_``.

        Every request is checked before any LLM call (:func:`~.calibration.check_answer_set_request`).
        With ``split.optimise`` a seeded ``optimisation_fraction`` of the examples chooses the
        split of alpha (or the HMP weight) and is never used for the final thresholds (their digests
        are recorded in ``calibration_.optimisation_["optimisation_question_ids"]``, so a report leaves
        them out of its held-out questions); a ``retrieval.calibration`` given by the user must not
        contain any of those questions.
        A calibration that is not guaranteed warns with
        :class:`~conformal_rag_plugins.core.errors.CoverageCeilingWarning` at the caller's line.

        With ``sampling.pilot`` (:class:`~.options.PilotOptions`; default: 5 questions, at most a
        fifth of the examples, only when the rest are enough to calibrate), a seeded pilot drawn
        after the optimisation split samples the generator first; its questions are then left out
        of both stages (recorded in ``calibration_.optimisation_["pilot"]``), so the decision to go
        on cannot bias the thresholds.

        Raises
        ------
        UnreachableTargetError
            The pilot's upper bound of the generator's coverage ceiling lies below the level the
            generator stage needs: raised after the pilot's LLM calls only, before the retrieval
            calibration and the full sampling.
        CalibrationError
            No examples, an impossible request, too few questions, or stages that share no question.
        """
        plan = self._plan(host, examples)
        self._calibration = run_sync(self._acombine(plan))
        return self._calibration

    async def aconformalize(self, host: AnswerSetHost, examples: Sequence[CalibrationExample]) -> AnswerSetCalibration:
        """Async :meth:`conformalize`: the generator stage is sampled in the running event loop.

        The host's retrieval calibration, pool fetches and an optimisation split (when asked
        for) run synchronously first, as in :meth:`conformalize`.
        """
        plan = self._plan(host, examples)
        self._calibration = await self._acombine(plan)
        return self._calibration

    def _check(self, alpha: float, n_questions: int | None) -> None:
        split = self.split
        check_answer_set_request(
            alpha,
            method=split.method,
            alpha_retrieval=None if split.optimise else split.alpha_retrieval,
            delta=split.delta,
            hmp_weight=None if split.optimise else split.hmp_weight,
            n_samples=self.sampling.n_samples,
            n_questions=n_questions,
            miss_bounds=self._sizing_bounds,
        )
        d_ret = split.delta_retrieval
        if d_ret is not None and split.method == "pac" and not (split.delta and 0.0 < d_ret < split.delta):
            raise CalibrationError(f"delta_retrieval must lie strictly between 0 and delta, got {d_ret!r}.")
        self._check_miss_bounds(alpha)

    @property
    def _sizing_bounds(self) -> tuple[float | None, float | None]:
        """The bounds the fewest-questions check uses: the given ones for a fixed split (an optimised split
        gives each stage more than its bound, so its need is not known before the optimisation)."""
        return (None, None) if self.split.optimise else fixed_bounds(self.split.miss_bounds)

    def _check_miss_bounds(self, alpha: float) -> None:
        """Refuse bounds the rule cannot use, before any LLM call."""
        settings = self.split.miss_bounds
        if settings == (None, None):
            return
        if self.split.method == "hmp":
            raise CalibrationError(
                "Stage miss bounds (SplitOptions(retrieval_miss_bound=, generator_miss_bound=)) apply to "
                "method='bonferroni' or 'pac'; the harmonic-mean rule has none."
            )
        if HELD_OUT in settings and not self.split.optimise:
            raise CalibrationError(
                f"A {HELD_OUT!r} miss bound is chosen on the optimisation questions: pass "
                "SplitOptions(optimise=True), or give the bound as a number fixed without the calibration questions."
            )
        if self.split.optimise:  # the optimiser keeps to the splits that leave each stage's alpha above its bound
            given = [b for b in fixed_bounds(settings) if b is not None]
            if sum(given) >= alpha:
                raise CalibrationError(
                    f"The stage miss bounds {settings} leave no split of alpha = {alpha:g}: each stage's alpha must "
                    "exceed its bound. Lower the bounds or confidence_level."
                )
            return
        a_ret = alpha / 2 if self.split.alpha_retrieval is None else float(self.split.alpha_retrieval)
        for name, bound, level in zip(
            ("SplitOptions(retrieval_miss_bound=)", "SplitOptions(generator_miss_bound=)"),
            fixed_bounds(settings),
            (a_ret, alpha - a_ret),
            strict=True,
        ):
            if bound is not None and bound >= level:
                raise CalibrationError(
                    f"{name} = {bound:g} must lie below that stage's alpha {level:.4g} (alpha = {alpha:g}, "
                    f"alpha_retrieval = {a_ret:.4g}): a stage missing that often cannot reach its level. Give the "
                    "stage more of alpha (SplitOptions(alpha_retrieval=...)), or lower confidence_level."
                )

    def _check_disjoint(self, opt: list[CalibrationExample]) -> None:
        given = self.retrieval.calibration
        if given is None or not opt:
            return
        used = set(given.question_ids_)
        if not used:
            raise CalibrationError(
                "SplitOptions(optimise=True) with a retrieval calibration that does not record its questions: the "
                "optimisation questions cannot be checked to be disjoint from it. Re-calibrate the retrieval stage "
                "with this version, or leave RetrievalStageOptions(calibration=None)."
            )
        overlap = sum(1 for ex in opt if ex.digest in used)
        if overlap:
            raise CalibrationError(
                f"{overlap} of the {len(opt)} optimisation questions were used to calibrate the given retrieval "
                "calibration: the split of alpha would be tuned on calibration data, which voids the guarantee. "
                "Calibrate the retrieval stage on questions disjoint from the optimisation split (same random_state "
                "and optimisation_fraction), or leave RetrievalStageOptions(calibration=None)."
            )

    def _needed(self, alpha: float) -> int | None:
        """The fewest calibration questions this request can be guaranteed with (what a pilot must leave)."""
        split = self.split
        common: dict[str, Any] = {
            "method": split.method,
            "alpha_retrieval": None if split.optimise else split.alpha_retrieval,
            "delta": split.delta,
            "hmp_weight": None if split.optimise else split.hmp_weight,
            "miss_bounds": self._sizing_bounds,
        }
        try:  # what _check asks for, and what this split's delta_retrieval needs
            needs = [min_answer_set_questions(alpha, **common, delta_retrieval=d)
                     for d in {None, split.delta_retrieval}]  # fmt: skip
        except ValueError:
            return None  # an impossible request: _check says why, and no pilot runs
        return None if None in needs else max(n for n in needs if n is not None)

    def _run_pilot(
        self, host: AnswerSetHost, stage: GeneratorStage, pilot: list[CalibrationExample], n_calibration: int
    ) -> PilotEstimate:
        """Sample the pilot questions on their defining gold chunks and judge the estimated ceiling.

        The target is what the current flag rule needs of the generator with ``n_calibration`` questions.
        """
        gold = {ex.digest: defining_gold(ex, host.fetch(ex.question), host.texts_for) for ex in pilot}
        sampled = acalibrate_generation(pilot, lambda ex: gold[ex.digest].text, stage, references=references_of)
        scores = run_sync(sampled)
        estimate = PilotEstimate(
            n_questions=len(scores),
            n_hits=sum(1 for s in scores if math.isfinite(s)),
            confidence=self.sampling.pilot_options.confidence,
            confidence_level=self.confidence_level,
            split=self.split,
            question_ids=tuple(ex.digest for ex in pilot),
            n_calibration=n_calibration,
        )
        return judge_pilot(estimate)

    def _plan(self, host: AnswerSetHost, examples: Sequence[CalibrationExample]) -> _Plan:
        """Everything before the generator stage is sampled, one step per job, in this order."""
        sampler = host.sampler(self.sampling)
        examples = self._labelled(host, examples)
        clustering = self.clustering.record()  # checked before the level, as ever
        alpha = alpha_from_confidence_level(self.confidence_level)
        opt, examples = self._optimisation_split(examples)
        pilot, examples = self._checked_pilot(alpha, examples, opt)
        if not pilot:  # the pilot's line says it with its estimate
            logger.warning("Answer-set %s", reach_line(len(examples), self.confidence_level, self.split))
        embedding = host.embedding(self.clustering.embedder)
        stage = self._generator_stage(sampler, clustering, embedding)
        estimate = self._run_pilot(host, stage, pilot, len(examples)) if pilot else None
        retrieval, aligned = self._retrieval_stage(host, examples)
        split, optimisation = self._optimised_split(host, stage, alpha, opt, retrieval, aligned)
        split = self._with_miss_bounds(split, optimisation)
        if estimate is not None:
            optimisation = {**(optimisation or {}), "pilot": estimate.to_dict()}
        gold = {ex.digest: defining_gold(ex, host.fetch(ex.question), host.texts_for) for ex in aligned}
        stage = self._described(stage, sampler, clustering, embedding)
        return _Plan(retrieval, aligned, gold, stage, split, optimisation)

    @staticmethod
    def _with_miss_bounds(split: SplitOptions, optimisation: dict[str, Any] | None) -> SplitOptions:
        """``split`` with each ``"held-out"`` stage bound replaced by the one the optimisation questions chose."""
        chosen = optimisation or {}
        ret, gen = split.miss_bounds
        return replace(
            split,
            retrieval_miss_bound=chosen.get("miss_bound_retrieval") if ret == HELD_OUT else ret,
            generator_miss_bound=chosen.get("miss_bound_generation") if gen == HELD_OUT else gen,
        )

    @staticmethod
    def _labelled(host: AnswerSetHost, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        """The examples, refused when empty, with gold on the host's chunks when it can put it there.

        Same questions, same digests: both stages use the gold that ``prepare_gold`` places.
        """
        examples = list(examples)
        if not examples:
            raise CalibrationError("No calibration examples were given; pass labelled questions.")
        if isinstance(host, GoldPreparingHost):
            examples = list(host.prepare_gold(examples))
        return examples

    def _optimisation_split(
        self, examples: list[CalibrationExample]
    ) -> tuple[list[CalibrationExample], list[CalibrationExample]]:
        """With ``split.optimise``: the seeded optimisation questions and the rest (else none and all)."""
        split = self.split
        if not split.optimise:
            return [], examples
        fraction = split.optimisation_fraction
        if not 0.0 < fraction < 1.0:
            raise CalibrationError(f"optimisation_fraction must lie in (0, 1), got {fraction!r}.")
        opt, rest = split_examples(examples, (fraction, 1 - fraction), seed=split.random_state)
        return opt, rest

    def _checked_pilot(
        self, alpha: float, examples: list[CalibrationExample], opt: list[CalibrationExample]
    ) -> tuple[list[CalibrationExample], list[CalibrationExample]]:
        """Check the request, draw the pilot (only when the rest can still be guaranteed), check what is left."""
        self._check(alpha, None)  # the request's own checks first, then what a pilot must leave
        needed = self._needed(alpha)
        size = 0 if needed is None else pilot_size(len(examples), self.sampling.pilot_options, needed)
        pilot, examples = draw_pilot(examples, size, self.sampling.pilot_options.random_state)
        self._check(alpha, len(examples))
        self._check_disjoint(opt)
        return pilot, examples

    def _generator_stage(
        self, sampler: GeneratorSampler, clustering: dict[str, Any], embedding: Embedding | None
    ) -> GeneratorStage:
        """The generator stage's sampling and clustering settings (its record is added by :meth:`_described`)."""
        return GeneratorStage(
            sampler.asample,
            n_samples=self.sampling.n_samples,
            clustering=clustering,
            match_threshold=self.clustering.match_threshold,
            embed=None if embedding is None else embedding.embed,
            progress=self.sampling.progress,
            model=sampler.model_label(),
        )

    def _retrieval_stage(
        self, host: AnswerSetHost, examples: list[CalibrationExample]
    ) -> tuple[RetrievalCalibration, list[CalibrationExample]]:
        """The given retrieval calibration, or the host's on ``examples``, aligned with the examples it used."""
        retrieval = self.retrieval.calibration or host.calibrate_retrieval(
            examples,
            confidence_level=self.confidence_level,
            score=self.retrieval.score,
            progress=self.sampling.progress,
        )
        return align_stages(retrieval, examples)

    def _optimised_split(
        self,
        host: AnswerSetHost,
        stage: GeneratorStage,
        alpha: float,
        opt: list[CalibrationExample],
        retrieval: RetrievalCalibration,
        aligned: list[CalibrationExample],
    ) -> tuple[SplitOptions, dict[str, Any] | None]:
        """The split of alpha: as given, or chosen on the optimisation questions (recorded, so reports skip them)."""
        split = self.split
        if not opt:
            return split, None
        optimisation = optimise_split_on_host(
            opt, host, stage, alpha=alpha, retrieval=retrieval, split=split, n_calibration=len(aligned)
        )
        # recorded like the retrieval side's selection, so a report leaves them out of its held-out questions
        optimisation["optimisation_question_ids"] = optimisation_ids(opt, aligned)
        ceiling = optimisation.get("generator_ceiling")
        if ceiling is not None:  # the generator on these data, before the calibration set is sampled
            logger.warning(
                "Answer-set %s (on the %d optimisation questions)",
                reach_line(len(aligned), self.confidence_level, split, ceiling),
                len(opt),
            )
        split = replace(
            split,
            alpha_retrieval=optimisation.get("alpha_retrieval", split.alpha_retrieval),
            hmp_weight=optimisation.get("hmp_weight", split.hmp_weight),
        )
        return split, optimisation

    @staticmethod
    def _described(
        stage: GeneratorStage, sampler: GeneratorSampler, clustering: dict[str, Any], embedding: Embedding | None
    ) -> GeneratorStage:
        """``stage`` with the generator record queries check (none when the sampler cannot describe its LLM)."""
        identity = sampler.identity()
        if identity is None:
            return stage
        described = None if embedding is None else embedding.identity
        return replace(stage, generator=live_generator(identity, clustering, described))

    async def _acombine(self, plan: _Plan) -> AnswerSetCalibration:
        return await acalibrate_end_to_end(
            plan.retrieval,
            plan.examples,
            lambda ex: plan.gold[ex.digest].text,
            plan.stage,
            confidence_level=self.confidence_level,
            split=plan.split,
            optimisation=plan.optimisation,
        )
