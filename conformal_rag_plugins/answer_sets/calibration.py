"""The end-to-end answer-set calibration: both stages' scores and thresholds, one JSON file."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.combination import (
    BonferroniThresholds,
    HarmonicMeanRule,
    PACThresholds,
    bonferroni_thresholds,
    harmonic_mean_rule,
    pac_thresholds,
)
from ..core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    InfiniteThresholdWarning,
    UncheckedGeneratorWarning,
)
from ..core.quantile import (
    check_miss_bound,
    conformal_quantile,
    default_miss_bound,
    flagged_min_calibration_size,
    pac_rank,
    threshold_rule,
)
from ..core.validation import check_alpha
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.groups import recomputed_groups
from ..storage.jsonio import (
    decode_float,
    encode_float,
    naming_file,
    read_checked,
    resolve_signing_key,
    sign,
    verify_signed,
    with_checksum,
    write_json,
)
from ..storage.schema import AnswerSetFile, check_fields
from .identity import scrub_record
from .options import HELD_OUT, SplitOptions

SCHEMA_VERSION = 1
_KIND = "conformal_rag_plugins.answer_set_calibration"
ANSWER_SET_METHODS = ("bonferroni", "pac", "hmp")


def _smallest(ok: Any, limit: int = 10**7) -> int | None:
    """Smallest n >= 1 with ok(n), for a monotone predicate (None when beyond ``limit``)."""
    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2 + 1 if hi > 1 else 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def min_answer_set_questions(
    alpha: float,
    *,
    method: str = "bonferroni",
    alpha_retrieval: float | None = None,
    delta: float | None = None,
    delta_retrieval: float | None = None,
    hmp_weight: float | None = None,
    miss_bounds: tuple[float | None, float | None] = (None, None),
) -> int | None:
    """Fewest calibration questions for which the rule can be guaranteed at all (no misses).

    Bonferroni: both stages have a :func:`~conformal_rag_plugins.core.quantile.flagged_rank`; PAC: both
    PAC ranks among the hits exist (:func:`~conformal_rag_plugins.core.quantile.pac_quantile`); HMP: a miss
    p-value ``1/(n+1)`` is rejected in each stage. ``miss_bounds``: each stage's pool-miss bound
    (``None``: half its alpha).

    >>> min_answer_set_questions(0.2), min_answer_set_questions(0.2, method="hmp")  # 1/(n+1) <= 0.1 / (2 - 0.1)
    (18, 18)
    """
    alpha = check_alpha(alpha)
    if method == "hmp":
        from ..core.combination import harmonic_mean_rule

        w = 0.5 if hmp_weight is None else float(hmp_weight)
        return _smallest(lambda n: harmonic_mean_rule([0.0] * n, [0.0] * n, alpha, w_ret=w).guaranteed)
    a_ret = alpha / 2 if alpha_retrieval is None else float(alpha_retrieval)
    a_gen = alpha - a_ret
    if method == "pac":
        d = float(delta or 0.1)
        d_ret = d / 2 if delta_retrieval is None else float(delta_retrieval)
        pairs = zip((a_ret, a_gen), miss_bounds, strict=True)
        b_ret, b_gen = (default_miss_bound(a) if b is None else float(b) for a, b in pairs)
        e_ret, e_gen = (a_ret - b_ret) / (1 - b_ret), (a_gen - b_gen) / (1 - b_gen)
        return _smallest(lambda n: pac_rank(n, e_ret, d_ret) is not None and pac_rank(n, e_gen, d - d_ret) is not None)
    return max(
        flagged_min_calibration_size(a_ret, miss_bounds[0]), flagged_min_calibration_size(a_gen, miss_bounds[1])
    )


def check_answer_set_request(
    alpha: float,
    *,
    method: str,
    alpha_retrieval: float | None,
    delta: float | None,
    hmp_weight: float | None,
    n_samples: int,
    n_questions: int | None = None,
    miss_bounds: tuple[float | None, float | None] = (None, None),
) -> None:
    """Refuse an answer-set calibration request that cannot work, before any LLM call.

    >>> check_answer_set_request(0.2, method="bonferroni", alpha_retrieval=0.25, delta=None, hmp_weight=None,
    ...                          n_samples=6)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.CalibrationError: alpha_retrieval must lie strictly between 0 and alpha = 0.2 ...
    """
    alpha = check_alpha(alpha)
    if method not in ANSWER_SET_METHODS:
        raise CalibrationError(f"method must be one of {ANSWER_SET_METHODS}, got {method!r}.")
    if alpha_retrieval is not None and method != "hmp":
        a = float(alpha_retrieval)
        if not (0.0 < a < alpha) or math.isnan(a):
            raise CalibrationError(
                f"alpha_retrieval must lie strictly between 0 and alpha = {alpha:g} (1 - confidence_level); got "
                f"{alpha_retrieval!r}. The generator gets alpha - alpha_retrieval."
            )
    if method == "pac":
        if delta is None:
            raise CalibrationError("method='pac' needs delta, e.g. delta=0.1.")
        check_alpha(delta, "delta")
    if hmp_weight is not None and not (0.0 < float(hmp_weight) < 1.0):
        raise CalibrationError(f"hmp_weight must lie strictly between 0 and 1, got {hmp_weight!r}.")
    if int(n_samples) < 1:
        raise CalibrationError(f"n_samples must be >= 1, got {n_samples!r}.")
    if n_questions is not None:
        need = min_answer_set_questions(
            alpha,
            method=method,
            alpha_retrieval=alpha_retrieval,
            delta=delta,
            hmp_weight=hmp_weight,
            miss_bounds=miss_bounds,
        )
        if need is None or n_questions < need:
            raise CalibrationError(
                f"{n_questions} calibration questions are too few for {method} at alpha = {alpha:g}"
                + (f" (alpha_retrieval = {alpha_retrieval:g})" if alpha_retrieval is not None else "")
                + f": even without a single miss the thresholds would be +inf. Use at least {need} questions "
                "(after any optimisation split), or a larger alpha."
            )


@dataclass(frozen=True)
class StageProvenance:
    """Where the scores came from (question digests, optimisation split, generator record); not used by thresholds.

    >>> StageProvenance(question_ids=("q1", "q2")).generator is None
    True
    """

    question_ids: Sequence[str] = ()
    optimisation: dict[str, Any] | None = None
    generator: dict[str, Any] | None = None


@dataclass(frozen=True)
class AnswerSetCalibration:
    """End-to-end calibration (fitted attributes end in ``_``).

    The answer set contains a correct answer with probability >= ``1 - alpha_`` (Bonferroni:
    ``alpha_retrieval_ + alpha_generation_ = alpha_``; PAC: the same for epsilon and
    ``delta_retrieval_ + delta_generation_ = delta_``; HMP: the finite-sample weighted harmonic-mean
    rule with ``hmp_weight_``). :meth:`retrieval_stage` drives a ``ConformalRetriever``.
    ``generator_`` records the LLM, sampling, prompt and embedder the generator threshold is tied to
    (checked at every query); ``None`` for older files and for hosts that cannot describe their LLM.
    Without it no query can check its generator against the calibrated one, so ``guaranteed_`` is
    ``False`` (``reason_`` says why), as is the saved ``"guaranteed"`` and every answer set served;
    such a file loads with an :class:`~conformal_rag_plugins.core.errors.UncheckedGeneratorWarning`.
    ``miss_bound_retrieval_`` / ``miss_bound_generation_`` are the stages' pool-miss bounds (Bonferroni/PAC;
    ``None``: half the stage's alpha), fixed without the calibration questions (by the user, or on the
    optimisation questions); a weak generator's bound lets its threshold be finite at a low ceiling.
    """

    retrieval_: RetrievalCalibration
    generation_scores_: tuple[float, ...]
    alpha_: float
    method_: str
    alpha_retrieval_: float
    alpha_generation_: float
    n_samples_: int
    model_: str
    clustering_: dict[str, Any]
    delta_: float | None = None
    delta_retrieval_: float | None = None
    delta_generation_: float | None = None
    hmp_weight_: float | None = None
    retrieval_threshold_: float = math.inf
    generation_threshold_: float = math.inf
    created_at_: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    optimisation_: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    question_ids_: tuple[str, ...] = field(default=(), compare=False, hash=False)
    generator_: dict[str, Any] | None = None
    miss_bound_retrieval_: float | None = None
    miss_bound_generation_: float | None = None

    def __post_init__(self) -> None:
        check_alpha(self.alpha_)
        if self.method_ not in ANSWER_SET_METHODS:
            raise CalibrationError(f"method must be one of {ANSWER_SET_METHODS}, got {self.method_!r}.")
        if self.retrieval_.risk_ != "miscoverage":
            raise CalibrationError(
                "Answer sets combine a retrieval stage that controls miscoverage (a gold chunk kept), but this one "
                f"controls {self.retrieval_.risk_!r}; calibrate the retrieval with control='coverage'."
            )
        if self.question_ids_:
            if len(self.question_ids_) != len(self.generation_scores_):
                raise CalibrationError(
                    f"{len(self.generation_scores_)} generator scores but {len(self.question_ids_)} question ids."
                )
            if tuple(self.retrieval_.question_ids_) != tuple(self.question_ids_):
                raise CalibrationError(
                    "The generator and retrieval stages were calibrated on different questions "
                    f"({len(self.question_ids_)} vs {len(self.retrieval_.question_ids_)} recorded); both stages "
                    "must use the same questions for the union bound to hold."
                )
        if self.method_ in ("bonferroni", "pac"):
            if not (0.0 < self.alpha_retrieval_ < self.alpha_):
                raise CalibrationError(
                    f"alpha_retrieval must lie strictly between 0 and alpha = {self.alpha_:g}, got "
                    f"{self.alpha_retrieval_!r}."
                )
            check_alpha(self.alpha_retrieval_, "alpha_retrieval")
            check_alpha(self.alpha_generation_, "alpha_generation")
            if abs(self.alpha_retrieval_ + self.alpha_generation_ - self.alpha_) > 1e-9:
                raise CalibrationError(
                    f"The split of alpha does not sum to alpha: {self.alpha_retrieval_} + "
                    f"{self.alpha_generation_} != {self.alpha_}."
                )
        if self.method_ == "pac":
            if self.delta_ is None or self.delta_retrieval_ is None or self.delta_generation_ is None:
                raise CalibrationError("A PAC answer-set calibration needs delta and its split.")
            if abs(self.delta_retrieval_ + self.delta_generation_ - self.delta_) > 1e-9:
                raise CalibrationError("The split of delta does not sum to delta.")
        if self.method_ == "hmp" and not (self.hmp_weight_ is not None and 0 < self.hmp_weight_ < 1):
            raise CalibrationError("The HMP rule needs a retrieval weight hmp_weight in (0, 1).")
        self._check_miss_bounds()
        if not self.generation_scores_:
            raise CalibrationError("No generator calibration scores: calibrate the generator stage first.")

    def _check_miss_bounds(self) -> None:
        bounds = (self.miss_bound_retrieval_, self.miss_bound_generation_)
        if self.method_ == "hmp" and bounds != (None, None):
            raise CalibrationError("The harmonic-mean rule takes no stage miss bounds (Bonferroni and PAC do).")
        levels = (self.alpha_retrieval_, self.alpha_generation_)
        for stage, bound, a in zip(("retrieval", "generation"), bounds, levels, strict=True):
            if bound is None:
                continue
            try:
                check_miss_bound(bound, a)
            except ConformalError as exc:
                raise CalibrationError(f"miss_bound_{stage}: {exc}") from None

    @property
    def miss_bounds_(self) -> tuple[float | None, float | None]:
        """``(miss_bound_retrieval_, miss_bound_generation_)``, as the rule's ``miss_bounds``."""
        return (self.miss_bound_retrieval_, self.miss_bound_generation_)

    @property
    def coverage_ceiling_(self) -> float:
        """Share of generator-calibration examples where some sample was correct."""
        return sum(1 for s in self.generation_scores_ if math.isfinite(s)) / len(self.generation_scores_)

    @property
    def guaranteed_(self) -> bool:
        """Whether the end-to-end guarantee holds: the rule rejects a pair missed in either stage.

        Bonferroni/PAC: both thresholds finite. HMP: a miss in either stage (p-value ``(1 + m) / (n + 1)``)
        is rejected even with the other stage's p-value at 1. Also needs the current threshold rule and
        a generator record (``generator_``), without which no query can check its generator.
        """
        checked = not self.retrieval_.stale_rule_reason_ and not self.unchecked_reason_
        return bool(self.rule().guaranteed) and checked

    @property
    def unchecked_reason_(self) -> str:
        """Why queries cannot check the generator (no ``generator_`` record), empty when they can.

        >>> from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
        >>> from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
        >>> scores = tuple(i / 40 for i in range(40))
        >>> ret = RetrievalCalibration(1.0, 0.1, "split", "relative", 5, 40, 0, scores,
        ...                            Fingerprint("none", "list", "cosine", "toy", 2, "cosine"))
        >>> cal = AnswerSetCalibration.from_stages(ret, [-1.0] * 40, alpha=0.4, n_samples=4, model="m",
        ...                                        clustering={"method": "exact"})
        >>> cal.guaranteed_, cal.unchecked_reason_[:39]
        (False, 'The calibration has no generator record')
        """
        if self.generator_ is not None:
            return ""
        return (
            "The calibration has no generator record (saved by an older version, or made with a host that does not "
            "describe its LLM), so no query can check that it uses the calibrated LLM, sampling settings, prompt and "
            "embedding model: its answer sets are not guaranteed. Re-calibrate with calibrate_answer_sets to record "
            "them."
        )

    @property
    def rule_reason_(self) -> str:
        """Why the combination rule or a stale threshold rule withholds the guarantee (empty when neither does)."""
        return " ".join(filter(None, (str(self.rule().reason), self.retrieval_.stale_rule_reason_)))

    @property
    def reason_(self) -> str:
        """Why the calibration is not guaranteed (empty when it is): the rule's reason, then the unchecked one."""
        return " ".join(filter(None, (self.rule_reason_, self.unchecked_reason_)))

    @property
    def generator_reachable_(self) -> bool:
        """Whether the generator stage can be calibrated at its level (finite threshold; HMP: a miss is rejected)."""
        rule = self.rule()
        if isinstance(rule, HarmonicMeanRule):
            return not bool(rule.include_pvalues(1.0, rule.miss_pvalues[1]))
        return math.isfinite(rule.q_gen)

    def retrieval_stage(self) -> RetrievalCalibration:
        """The retrieval calibration with this split's threshold (HMP: superset prefilter at ``alpha * w_ret / 2``).

        A grouped retrieval stage (``group_by`` or ``chunk_group_key``) gets its per-group thresholds
        refitted from the stored scores and group labels at this split's level (``alpha_retrieval_``,
        PAC: ``delta_retrieval_``) and pool-miss bound (``miss_bound_retrieval_``): the thresholds
        ``retrieval_`` was saved with were fitted at its own ``alpha_`` and would be served under the
        wrong level.
        """
        pac = self.method_ == "pac"
        stage = replace(
            self.retrieval_,
            threshold_=self.retrieval_threshold_,
            alpha_=self.alpha_retrieval_,
            method_="pac" if pac else "split",
            delta_=self.delta_retrieval_ if pac else None,
            miss_bound_=self.miss_bound_retrieval_,  # the stage's bound, as its pooled rule used it
        )
        if stage.group_labels_:
            stage = replace(stage, groups_=recomputed_groups(stage))
        return stage

    def rule(self) -> BonferroniThresholds | PACThresholds | HarmonicMeanRule:
        """The combination rule of :mod:`conformal_rag_plugins.core.combination` for this calibration."""
        ret, gen = self.retrieval_.scores_, self.generation_scores_
        with warnings.catch_warnings(), threshold_rule(self.retrieval_.threshold_rule_):
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            if self.method_ == "hmp":
                assert self.hmp_weight_ is not None
                return harmonic_mean_rule(ret, gen, self.alpha_, w_ret=self.hmp_weight_)
            if self.method_ == "pac":
                return pac_thresholds(
                    ret,
                    gen,
                    self.alpha_,
                    float(self.delta_ or 0),
                    epsilon_split=(self.alpha_retrieval_, self.alpha_generation_),
                    delta_split=(self.delta_retrieval_, self.delta_generation_),
                    miss_bounds=self.miss_bounds_,
                )
            return bonferroni_thresholds(
                ret,
                gen,
                self.alpha_,
                alpha_ret=self.alpha_retrieval_,
                alpha_gen=self.alpha_generation_,
                miss_bounds=self.miss_bounds_,
            )

    @property
    def provenance_(self) -> StageProvenance:
        """Where the scores came from: question digests, the optimisation and pilot record, the generator record."""
        return StageProvenance(
            question_ids=self.question_ids_, optimisation=dict(self.optimisation_), generator=self.generator_
        )

    def split_options(self) -> SplitOptions:
        """The :class:`SplitOptions` that give this calibration's rule and split of alpha (no optimisation)."""
        return SplitOptions(
            method=self.method_,
            alpha_retrieval=self.alpha_retrieval_,
            delta=self.delta_,
            delta_retrieval=self.delta_retrieval_,
            hmp_weight=self.hmp_weight_,
            retrieval_miss_bound=self.miss_bound_retrieval_,
            generator_miss_bound=self.miss_bound_generation_,
        )

    def with_current_rule(self) -> AnswerSetCalibration:
        """A copy whose two stages' thresholds are recomputed from the stored scores under the current rule.

        The upgrade path of a file saved before thresholds accounted for pool misses (its retrieval
        stage's ``threshold_rule_`` is ``"plain-rank"``; :attr:`reason_` says so and its sets are never
        flagged guaranteed). The retrieval stage goes through
        :meth:`RetrievalCalibration.with_current_rule` (pooled and per-group thresholds), then both
        stages' thresholds are combined again at the same level, rule and split of alpha from the same
        scores; the questions, optimisation and pilot record, generator record and ``created_at_`` are
        kept. No LLM call. Under the current rule already, it returns ``self``.

        Examples
        --------
        >>> from dataclasses import replace
        >>> from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
        >>> from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
        >>> scores = tuple(i / 40 for i in range(40))
        >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
        >>> old_stage = RetrievalCalibration(1.0, 0.1, "split", "relative", 5, 40, 0, scores, fp,
        ...                                  threshold_rule_="plain-rank")
        >>> old = AnswerSetCalibration.from_stages(old_stage, [-1.0] * 40, alpha=0.2, n_samples=4, model="m",
        ...     clustering={"method": "exact"}, provenance=StageProvenance(generator={"llm": {"name": "m"}}))
        >>> new = old.with_current_rule()
        >>> old.guaranteed_, new.guaranteed_, new.retrieval_.threshold_rule_, new.generator_ == old.generator_
        (False, True, 'pool-miss-2', True)
        >>> new.save("calibration.json")  # doctest: +SKIP
        """
        if not self.retrieval_.stale_rule_reason_:
            return self
        fresh = self._refit(self.retrieval_.with_current_rule(), self.provenance_)
        return replace(fresh, created_at_=self.created_at_)

    @classmethod
    def from_stages(
        cls,
        retrieval: RetrievalCalibration,
        generation_scores: Sequence[float],
        *,
        alpha: float,
        split: SplitOptions | None = None,
        n_samples: int,
        model: str,
        clustering: dict[str, Any],
        provenance: StageProvenance | None = None,
    ) -> AnswerSetCalibration:
        """Combine the two stages' calibration scores under ``split``'s rule (its optimisation settings unused).

        Defaults: ``alpha_retrieval = alpha / 2``; PAC splits ``delta`` equally; HMP ``hmp_weight`` 0.5.
        The stages' pool-miss bounds (Bonferroni/PAC) are ``split.retrieval_miss_bound`` and
        ``split.generator_miss_bound``, numbers fixed without these questions (``None``: half the stage's
        alpha; a ``"held-out"`` one must be resolved on the optimisation questions first).
        """
        split = split or SplitOptions()
        method, alpha_retrieval, delta, hmp_weight = split.method, split.alpha_retrieval, split.delta, split.hmp_weight
        delta_retrieval = split.delta_retrieval
        provenance = provenance or StageProvenance()
        optimisation, question_ids, generator = provenance.optimisation, provenance.question_ids, provenance.generator
        alpha = check_alpha(alpha)
        gen = tuple(float(s) for s in generation_scores)
        common: dict[str, Any] = {
            "n_samples_": n_samples,
            "model_": model,
            "clustering_": clustering,
            "optimisation_": optimisation or {},
            "question_ids_": tuple(question_ids or ()),
            "generator_": None if generator is None else scrub_record(generator),
        }
        if len(gen) != len(retrieval.scores_):
            raise CalibrationError(
                f"{len(gen)} generator scores but {len(retrieval.scores_)} retrieval scores: both stages must be "
                "calibrated on the same questions."
            )
        if method == "hmp":
            w = 0.5 if hmp_weight is None else float(hmp_weight)
            a_ret = alpha * w / 2
            with warnings.catch_warnings(), threshold_rule(retrieval.threshold_rule_):
                warnings.simplefilter("ignore", InfiniteThresholdWarning)
                q_ret = conformal_quantile(retrieval.scores_, a_ret)
            return cls(
                retrieval,
                gen,
                alpha,
                method,
                a_ret,
                alpha - a_ret,
                hmp_weight_=w,
                retrieval_threshold_=q_ret,
                generation_threshold_=math.inf,
                **common,
            )
        if HELD_OUT in split.miss_bounds:
            raise CalibrationError(
                f"A {HELD_OUT!r} miss bound is chosen on the optimisation questions before the stages are combined."
            )
        b_ret, b_gen = (None if b is None else float(b) for b in split.miss_bounds)
        bounds = {"miss_bound_retrieval_": b_ret, "miss_bound_generation_": b_gen}
        a_ret = alpha / 2 if alpha_retrieval is None else float(alpha_retrieval)
        d_ret = d_gen = None
        if method == "pac":
            if delta is None:
                raise CalibrationError("method='pac' needs delta.")
            d_ret = delta / 2 if delta_retrieval is None else float(delta_retrieval)
            d_gen = delta - d_ret
        draft = cls(
            retrieval,
            gen,
            alpha,
            method,
            a_ret,
            alpha - a_ret,
            delta_=delta,
            delta_retrieval_=d_ret,
            delta_generation_=d_gen,
            **bounds,
            **common,
        )
        rule = draft.rule()
        assert isinstance(rule, BonferroniThresholds | PACThresholds)
        return replace(draft, retrieval_threshold_=rule.q_ret, generation_threshold_=rule.q_gen)

    def to_dict(self, *, signing_key: str | bytes | None = None) -> dict[str, Any]:
        """JSON-ready dict with schema version, checksum and, with an explicit ``signing_key``, a signature."""
        key = resolve_signing_key(signing_key) if signing_key is not None else None
        payload = {
            "kind": _KIND,
            "schema_version": SCHEMA_VERSION,
            "retrieval": self.retrieval_.to_dict(),
            "generation_scores": [encode_float(s) for s in self.generation_scores_],
            "alpha": self.alpha_,
            "method": self.method_,
            "alpha_retrieval": self.alpha_retrieval_,
            "alpha_generation": self.alpha_generation_,
            "delta": self.delta_,
            "delta_retrieval": self.delta_retrieval_,
            "delta_generation": self.delta_generation_,
            "hmp_weight": self.hmp_weight_,
            "retrieval_threshold": encode_float(self.retrieval_threshold_),
            "generation_threshold": encode_float(self.generation_threshold_),
            "coverage_ceiling": self.coverage_ceiling_,
            "n_samples": self.n_samples_,
            "model": self.model_,
            "clustering": self.clustering_,
            "created_at": self.created_at_,
            "optimisation": self.optimisation_,
            "question_ids": list(self.question_ids_),
            "guaranteed": self.guaranteed_,
        }
        if self.generator_ is not None:
            payload["generator"] = self.generator_
        for name, bound in (("miss_bound_retrieval", self.miss_bound_retrieval_),
                            ("miss_bound_generation", self.miss_bound_generation_)):  # fmt: skip
            if bound is not None:  # written only when set: files without bounds read as before
                payload[name] = bound
        return with_checksum(sign(payload, key))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, signing_key: str | bytes | None = None) -> AnswerSetCalibration:
        """Validate, rebuild, and check the stored thresholds against the stored scores.

        Raises
        ------
        CalibrationIntegrityError
            A field is missing or mangled (kind, version, checksum, signature with an explicit key), or
            the stored thresholds disagree with those recomputed from the scores, level and method.
        """
        verify_signed(data, _KIND, SCHEMA_VERSION, signing_key)
        check_fields(AnswerSetFile, data, "answer-set calibration")
        try:
            cal = cls._build(data)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CalibrationIntegrityError):
                raise
            raise CalibrationIntegrityError(f"Answer-set calibration file is inconsistent: {exc}") from exc
        try:
            fresh = cls._recompute(cal)
        except CalibrationError as exc:
            raise CalibrationIntegrityError(f"Answer-set calibration file is inconsistent: {exc}") from exc
        cls._compare(cal, fresh)
        if cal.generator_ is None:
            warnings.warn(
                "This answer-set calibration does not record the LLM, sampling settings and embedding model it was "
                "made with (saved by an older version, or made without an adapter that describes its LLM), so "
                "queries cannot check that they use the same ones; its generator threshold is used unchecked, so the "
                "calibration (guaranteed_) and its answer sets say guaranteed=False. Re-calibrate with "
                "calibrate_answer_sets to record them.",
                UncheckedGeneratorWarning,
                stacklevel=3,
            )
        return cal

    def _refit(
        self, retrieval: RetrievalCalibration, provenance: StageProvenance | None = None
    ) -> AnswerSetCalibration:
        """Both stages combined again from ``retrieval`` and the stored generator scores, at this level and split."""
        return self.from_stages(
            retrieval,
            self.generation_scores_,
            alpha=self.alpha_,
            split=self.split_options(),
            n_samples=self.n_samples_,
            model=self.model_,
            clustering=self.clustering_,
            provenance=provenance,
        )

    @classmethod
    def _recompute(cls, cal: AnswerSetCalibration) -> AnswerSetCalibration:
        return cal._refit(cal.retrieval_)

    @staticmethod
    def _compare(cal: AnswerSetCalibration, fresh: AnswerSetCalibration) -> None:
        for name in ("retrieval_threshold_", "generation_threshold_", "alpha_generation_"):
            stored, again = getattr(cal, name), getattr(fresh, name)
            finite = math.isfinite(stored) and math.isfinite(again)
            close = finite and abs(stored - again) <= 1e-9 * max(1.0, abs(again))
            if not (stored == again or close):  # an infinity only equals itself (+inf -> 0.01 is an edit)
                raise CalibrationIntegrityError(
                    f"The stored {name.rstrip('_')} {stored!r} disagrees with {again!r} recomputed from the stored "
                    "scores, level and method: the file was edited or corrupted."
                )

    @classmethod
    def _build(cls, data: dict[str, Any]) -> AnswerSetCalibration:
        return cls(
            retrieval_=RetrievalCalibration.from_dict(data["retrieval"]),
            generation_scores_=tuple(decode_float(s) for s in data["generation_scores"]),
            alpha_=float(data["alpha"]),
            method_=str(data["method"]),
            alpha_retrieval_=float(data["alpha_retrieval"]),
            alpha_generation_=float(data["alpha_generation"]),
            n_samples_=int(data["n_samples"]),
            model_=str(data["model"]),
            clustering_=dict(data["clustering"]),
            delta_=data.get("delta"),
            delta_retrieval_=data.get("delta_retrieval"),
            delta_generation_=data.get("delta_generation"),
            hmp_weight_=data.get("hmp_weight"),
            retrieval_threshold_=decode_float(data["retrieval_threshold"]),
            generation_threshold_=decode_float(data["generation_threshold"]),
            created_at_=str(data["created_at"]),
            optimisation_=dict(data.get("optimisation") or {}),
            question_ids_=tuple(str(q) for q in data.get("question_ids") or ()),
            generator_=None if data.get("generator") is None else scrub_record(data["generator"]),
            miss_bound_retrieval_=data.get("miss_bound_retrieval"),
            miss_bound_generation_=data.get("miss_bound_generation"),
        )

    def save(self, path: str | Path, *, signing_key: str | bytes | None = None) -> Path:
        """Write JSON (never pickle), atomically; signed with ``signing_key`` or ``$CONFORMAL_RAG_SIGNING_KEY``."""
        return write_json(path, self.to_dict(signing_key=resolve_signing_key(signing_key)))

    @classmethod
    def load(cls, path: str | Path, *, signing_key: str | bytes | None = None) -> AnswerSetCalibration:
        """Read and verify a file written by :meth:`save`.

        With ``signing_key`` (or ``$CONFORMAL_RAG_SIGNING_KEY``) a file without a valid signature is refused.

        Raises
        ------
        CalibrationIntegrityError
            The message names the file and what is wrong with it.
        """
        with naming_file(path):
            return cls.from_dict(
                read_checked(path, _KIND, SCHEMA_VERSION), signing_key=resolve_signing_key(signing_key)
            )

    def summary(self) -> str:
        """One line for logs and the CLI."""

        def fmt(x: float) -> str:
            return "+inf" if math.isinf(x) else f"{x:.4g}"

        named = zip(("ret", "gen"), self.miss_bounds_, strict=True)
        bounds = "".join(f"miss_bound_{k}={b:g} " for k, b in named if b is not None)
        return (
            f"{self.method_} alpha={self.alpha_} (retrieval {self.alpha_retrieval_:.4g}, generation "
            f"{self.alpha_generation_:.4g}) q_ret={fmt(self.retrieval_threshold_)} "
            f"q_gen={fmt(self.generation_threshold_)} coverage_ceiling={self.coverage_ceiling_:.2f} "
            + bounds
            + f"M={self.n_samples_} model={self.model_}"
        )
