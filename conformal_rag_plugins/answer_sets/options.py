"""Frozen option objects of answer-set calibration, passed whole instead of threaded as keywords.

Every default is the value the keyword had before the options were grouped.

>>> split = SplitOptions(alpha_retrieval=0.1)
>>> split.method, split.alpha_retrieval, split.optimise
('bonferroni', 0.1, False)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.adaptive_schedule import geometric_schedule
from ..core.clustering import GENERATOR_SCORES
from ..core.errors import CalibrationError, MovedOptionError
from ..retrieval.calibration import RetrievalCalibration
from .sample_cache import SampleCache

DEFAULT_CLUSTERING: dict[str, Any] = {"method": "rougeL", "tau": 0.7}

HELD_OUT = "held-out"
"""A stage's ``miss_bound`` chosen on the optimisation questions (``SplitOptions(optimise=True)``)."""

MissBound = float | str | None
"""A stage's pool-miss bound: a share in ``[0, alpha_stage)``, :data:`HELD_OUT`, or ``None`` (half its alpha)."""


def check_stage_miss_bound(value: MissBound, name: str) -> None:
    """Refuse a miss bound that is neither ``None``, :data:`HELD_OUT` nor a share in ``[0, 1)``.

    >>> check_stage_miss_bound(0.6, "generator_miss_bound"), check_stage_miss_bound(HELD_OUT, "miss_bound")
    (None, None)
    >>> check_stage_miss_bound(1.2, "miss_bound")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.CalibrationError: miss_bound must be None, 'held-out' or a share in [0, 1) ...
    """
    if value is None or value == HELD_OUT:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= float(value) < 1.0
    if not ok:
        raise CalibrationError(
            f"{name} must be None, {HELD_OUT!r} or a share in [0, 1) of questions the stage may miss (0: it cannot "
            f"miss), got {value!r}."
        )


def with_generator_score(clustering: dict[str, Any] | None, generator_score: str | None) -> dict[str, Any]:
    """The clustering record with its generator score (``"frequency"`` unless set), checked.

    >>> with_generator_score(None, "likelihood")
    {'method': 'rougeL', 'tau': 0.7, 'score': 'likelihood'}
    """
    out = dict(clustering or DEFAULT_CLUSTERING)
    score = generator_score or out.get("score", "frequency")
    if score not in GENERATOR_SCORES:
        raise CalibrationError(f"generator_score must be one of {GENERATOR_SCORES}, got {score!r}.")
    out["score"] = score
    return out


@dataclass(frozen=True)
class PilotOptions:
    """A small seeded pilot that estimates the generator's coverage ceiling before the full calibration.

    The pilot samples the generator on ``questions`` examples (drawn with ``random_state``, after any
    optimisation split) and counts those where some sampled answer cluster is correct: the coverage
    ceiling, the best coverage any generator threshold can reach. When even its one-sided
    Clopper-Pearson upper bound at ``confidence`` lies below the level the generator stage needs,
    calibration stops with :class:`~conformal_rag_plugins.core.errors.UnreachableTargetError`
    before the full budget is spent; when only the estimate lies below it, it warns
    (:class:`~conformal_rag_plugins.core.errors.CoverageCeilingWarning`) and goes on.

    The pilot questions are never used by the thresholds: the decision to go on depends on them, so
    reusing them would condition the calibration scores on that decision. The remaining questions
    (and the test questions) are independent of the pilot, so the guarantee holds as without it,
    with ``questions`` fewer calibration questions. The LLM is not called more often than without a
    pilot (each pilot question is sampled once, as it would have been).

    Parameters
    ----------
    questions : int, default 5
        Pilot questions; ``0`` turns the pilot off (as does ``SamplingOptions(pilot=None)``). Fewer are taken when the
        rest would be too few to calibrate, or more than ``max_fraction`` of the examples; fewer
        than ``min_questions`` and there is no pilot.
    confidence : float, default 0.95
        Level of the one-sided upper bound that must lie below the target to stop (lower: stop
        sooner, on less evidence; the guarantee is unaffected either way).
    max_fraction : float, default 0.2
        At most this share of the examples goes to the pilot.
    min_questions : int, default 3
    random_state : int, default 0
        Seed of the pilot draw.

    Examples
    --------
    >>> PilotOptions().questions, PilotOptions(questions=0).enabled
    (5, False)
    """

    questions: int = 5
    confidence: float = 0.95
    max_fraction: float = 0.2
    min_questions: int = 3
    random_state: int = 0

    def __post_init__(self) -> None:
        if int(self.questions) < 0:
            raise CalibrationError(f"PilotOptions(questions=) must be >= 0, got {self.questions!r}.")
        if not 0.0 < float(self.confidence) < 1.0:
            raise CalibrationError(f"PilotOptions(confidence=) must lie in (0, 1), got {self.confidence!r}.")
        if not 0.0 < float(self.max_fraction) < 1.0:
            raise CalibrationError(f"PilotOptions(max_fraction=) must lie in (0, 1), got {self.max_fraction!r}.")

    @property
    def enabled(self) -> bool:
        """Whether a pilot runs at all (``questions > 0``)."""
        return int(self.questions) > 0

    @classmethod
    def resolve(cls, pilot: PilotOptions | int | None) -> PilotOptions:
        """``pilot`` as options: ``None`` or ``0`` turn it off, an int is the number of questions.

        >>> PilotOptions.resolve(None).enabled, PilotOptions.resolve(8).questions
        (False, 8)
        """
        if pilot is None:
            return cls(questions=0)
        if isinstance(pilot, bool) or not isinstance(pilot, int | PilotOptions):
            raise CalibrationError(f"pilot must be PilotOptions, a number of questions or None, got {pilot!r}.")
        return cls(questions=pilot) if isinstance(pilot, int) else pilot


@dataclass(frozen=True)
class SamplingOptions:
    """How answers are drawn from the LLM: ``n_samples`` per (question, chunk), concurrently, cached.

    The LLM's own decoding settings are read from the client and recorded in ``generator_``.

    Parameters
    ----------
    n_samples : int, default 10
        M, the answers drawn per (question, chunk); queries must use the same M.
    max_concurrency : int, default 4
        LLM calls in flight (1 for a local model that is not thread-safe).
    timeout : float or None, default 120.0
        Seconds before one call is abandoned (then retried).
    retries : int, default 2
        Retries with backoff; a call that still fails becomes an empty (abstaining) sample.
    cache : SampleCache, str or os.PathLike, optional
        Stores samples per (question, context, model, prompt, temperature, n), so a re-run asks the
        LLM only for what is missing. A path opens a :class:`SampleCache` in that SQLite file
        (its folder created); share one options object between calibration and queries to share it.
    progress : bool, default True
    pilot : PilotOptions, int or None, default PilotOptions()
        Calibration only: a seeded pilot of 5 questions first estimates the generator's coverage
        ceiling and stops with :class:`~conformal_rag_plugins.core.errors.UnreachableTargetError`
        before the full sampling when the target is clearly out of reach (see :class:`PilotOptions`;
        an int is its number of questions). ``None`` or ``0``: no pilot, every example calibrates.
        Queries ignore it.

    Examples
    --------
    >>> SamplingOptions(n_samples=5, max_concurrency=1).n_samples
    5
    >>> SamplingOptions(pilot=None).pilot_options.enabled
    False
    >>> type(SamplingOptions(cache=":memory:").cache).__name__
    'SampleCache'
    """

    n_samples: int = 10
    max_concurrency: int = 4
    timeout: float | None = 120.0
    retries: int = 2
    cache: SampleCache | str | os.PathLike[str] | None = None
    progress: bool = True
    pilot: PilotOptions | int | None = PilotOptions()

    def __post_init__(self) -> None:
        PilotOptions.resolve(self.pilot)  # a bad pilot fails here, before any LLM call
        if isinstance(self.cache, str | os.PathLike):  # a path: the cache in that file
            object.__setattr__(self, "cache", SampleCache(self.cache))

    @property
    def pilot_options(self) -> PilotOptions:
        """:attr:`pilot` as :class:`PilotOptions` (``None``/``0``: disabled)."""
        return PilotOptions.resolve(self.pilot)


@dataclass(frozen=True)
class SplitOptions:
    """How the end-to-end level is split between the retrieval and the generator stage.

    Parameters
    ----------
    method : {"bonferroni", "pac", "hmp"}, default "bonferroni"
    alpha_retrieval : float, optional
        Retrieval's share of ``alpha`` (Bonferroni/PAC; default the equal split).
    delta : float, optional
        PAC's failure probability (required for ``method="pac"``).
    delta_retrieval : float, optional
        Retrieval's share of ``delta`` (default the equal split).
    hmp_weight : float, optional
        The retrieval weight of the harmonic-mean rule (default 0.5).
    optimise : bool, default False
        Choose ``alpha_retrieval`` (or ``hmp_weight``) by Bayesian optimisation on a seeded
        ``optimisation_fraction`` of the examples, then calibrate on the disjoint rest.
    optimisation_fraction : float, default 0.3
    bo_calls : int, default 15
        Objective evaluations of the optimisation.
    random_state : int, default 0
        Seed of the optimisation split and the optimiser.
    retrieval_miss_bound : float, "held-out" or None, default None
        The share of questions whose gold chunk the candidate pool may miss, as the end-to-end rule's
        retrieval threshold assumes (``None``: half ``alpha_retrieval``; ``0``: a pool that is the whole
        corpus; ``"held-out"`` with ``optimise=True``: chosen on the optimisation questions). Recorded.
    generator_miss_bound : float, "held-out" or None, default None
        The share of questions on which the generator may have no correct sampled answer (its pool
        miss, ``1 -`` its coverage ceiling) that the generator threshold's flag assumes (Bonferroni/PAC;
        ``miss_bound`` of :func:`~conformal_rag_plugins.core.quantile.conformal_quantile`). ``None``:
        half ``alpha_generation``, which needs a ceiling of about ``1 - alpha_generation / 2``; a weak
        generator needs a larger bound, below ``alpha_generation``. ``"held-out"`` (with
        ``optimise=True``): an upper confidence bound of the miss share on the optimisation questions,
        which the calibration never uses, so the guarantee keeps its proof. Recorded in the calibration.
    miss_bound_confidence : float, default 0.95
        The one-sided Clopper-Pearson level of a ``"held-out"`` bound: the stage's true miss share lies
        below it with this probability over the optimisation draw (the guarantee given the flag assumes it).

    Examples
    --------
    >>> SplitOptions(method="pac", delta=0.1).delta
    0.1
    >>> SplitOptions(optimise=True, generator_miss_bound="held-out").miss_bounds
    (None, 'held-out')
    """

    method: str = "bonferroni"
    alpha_retrieval: float | None = None
    delta: float | None = None
    delta_retrieval: float | None = None
    hmp_weight: float | None = None
    optimise: bool = False
    optimisation_fraction: float = 0.3
    bo_calls: int = 15
    random_state: int = 0
    retrieval_miss_bound: MissBound = None
    generator_miss_bound: MissBound = None
    miss_bound_confidence: float = 0.95

    def __post_init__(self) -> None:
        check_stage_miss_bound(self.retrieval_miss_bound, "retrieval_miss_bound")
        check_stage_miss_bound(self.generator_miss_bound, "generator_miss_bound")
        if not 0.0 < float(self.miss_bound_confidence) < 1.0:
            raise CalibrationError(f"miss_bound_confidence must lie in (0, 1), got {self.miss_bound_confidence!r}.")

    @property
    def miss_bounds(self) -> tuple[MissBound, MissBound]:
        """``(retrieval_miss_bound, generator_miss_bound)``."""
        return (self.retrieval_miss_bound, self.generator_miss_bound)


@dataclass(frozen=True)
class ClusteringOptions:
    """How sampled answers are grouped into clusters and matched to the references.

    Parameters
    ----------
    method : str, default "rougeL"
        The equivalence of two answers (``"rougeL"``, ``"exact"``, ``"embedding"``, ...).
    tau : float or None, default 0.7
        Its threshold (``None``: the method's default, not recorded).
    generator_score : {"frequency", "likelihood"}, optional
        The cluster confidence: sample frequency (default), or frequency with ties broken by token
        likelihood (smaller sets; needs logprobs, e.g. ``local.llamaindex_llm(logprobs=True)``). Recorded in
        ``clustering_["score"]`` and used at query time.
    match_threshold : float, default 0.3
        A cluster matches a reference when its ROUGE-1 F1 exceeds this.
    embedder : optional
        The framework's embedding model, required for ``method="embedding"``.

    Examples
    --------
    >>> ClusteringOptions(method="exact", tau=None, generator_score="likelihood").record()
    {'method': 'exact', 'score': 'likelihood'}
    """

    method: str = "rougeL"
    tau: float | None = 0.7
    generator_score: str | None = None
    match_threshold: float = 0.3
    embedder: Any = None

    def record(self) -> dict[str, Any]:
        """The clustering record saved in the calibration (method, tau, score), checked."""
        out: dict[str, Any] = {"method": self.method}
        if self.tau is not None:
            out["tau"] = self.tau
        return with_generator_score(out, self.generator_score)


@dataclass(frozen=True)
class RetrievalStageOptions:
    """The retrieval stage of an answer-set calibration.

    The pool-miss bound the end-to-end rule's retrieval threshold assumes is
    ``SplitOptions(retrieval_miss_bound=...)``, beside the generator's.

    Parameters
    ----------
    calibration : RetrievalCalibration, optional
        Use this retrieval calibration (same questions, ``control="coverage"``, none of the
        ``SplitOptions(optimise=True)`` questions) instead of calibrating the host here.
    score : str, default "relative"
        The nonconformity family when the retrieval stage is calibrated here.
    pool_size : int, optional
        Candidates per question (default: the host's setting).

    Examples
    --------
    >>> RetrievalStageOptions(score="rank").score
    'rank'
    """

    calibration: RetrievalCalibration | None = None
    score: str = "relative"
    pool_size: int | None = None


@dataclass(frozen=True)
class AdaptiveSchedule:
    """The geometric context schedule of adaptive answering (1, 2, 4, ... best chunks).

    Parameters
    ----------
    initial : int, default 1
    factor : float, default 2.0
    max_rounds : int, optional
        At most this many rounds (the last one always shows the whole set).
    separator : str, default "\\n"
        Joins a round's chunks into the prompt's ``{context}``.

    Raises
    ------
    ConformalError
        On ``initial < 1``, ``factor <= 1`` or ``max_rounds < 1``.

    Examples
    --------
    >>> AdaptiveSchedule(initial=2).factor
    2.0
    """

    initial: int = 1
    factor: float = 2.0
    max_rounds: int | None = None
    separator: str = "\n"

    def __post_init__(self) -> None:
        geometric_schedule(1, initial=self.initial, factor=self.factor, max_rounds=self.max_rounds)


MOVED_KEYWORDS: dict[str, str] = {
    **dict.fromkeys(("n_samples", "max_concurrency", "timeout", "retries", "cache"), "sampling=SamplingOptions"),
    **dict.fromkeys(("initial", "factor", "max_rounds", "separator"), "schedule=AdaptiveSchedule"),
}
"""The synthesizers' former keywords and the option object (``keyword=Class``) that holds each now."""


def reject_moved_keywords(owner: str, given: Mapping[str, Any]) -> None:
    """Raise :class:`~conformal_rag_plugins.core.errors.MovedOptionError` if ``given`` has a moved keyword.

    So that e.g. ``max_concurrency=1`` passed to a synthesizer is refused, not ignored.

    >>> reject_moved_keywords("Synth", {"streaming": True})
    >>> try:
    ...     reject_moved_keywords("Synth", {"max_concurrency": 1, "initial": 2})
    ... except TypeError as error:
    ...     print(str(error).split(": pass ")[1])
    sampling=SamplingOptions(max_concurrency=1), schedule=AdaptiveSchedule(initial=2).
    """
    groups: dict[str, list[str]] = {}
    for name, value in given.items():
        if name in MOVED_KEYWORDS:
            groups.setdefault(MOVED_KEYWORDS[name], []).append(f"{name}={value!r}")
    if groups:
        hint = ", ".join(f"{target}({', '.join(args)})" for target, args in groups.items())
        raise MovedOptionError(f"{owner} takes these settings in option objects: pass {hint}.")
