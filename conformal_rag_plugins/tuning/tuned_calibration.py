"""Tune a hybrid host (fusion method and dense weight) and the score family, then calibrate.

Protocol (framework-neutral; the adapters ``llamaindex/hybrid_tuning.py`` and
``langchain/hybrid_tuning.py`` only build one host per configuration):

1. split the labelled questions, with a seed, into an *optimisation* part and a
   disjoint *calibration* part;
2. query every candidate host on the optimisation part only, and choose the
   (configuration, score family) with the smallest mean conformal set there
   (:func:`~conformal_rag_plugins.core.config_search.choose_configuration`);
3. query only the chosen host on the calibration part and compute the threshold
   there. The calibration part is never seen by step 2, so the usual
   split-conformal guarantee holds for the chosen host.

The chosen host's fingerprint (fusion method, weights, pool size) goes into the
calibration, so a retriever with another fusion setting is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.config_search import OBJECTIVES, choose_configuration
from ..core.errors import CalibrationError
from ..core.quantile import min_calibration_size
from ..core.retrieval_scores import SCORE_FAMILIES
from ..core.validation import check_alpha
from ..datasets.examples import CalibrationExample, split_examples
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.conformalizer import optimisation_ids
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.groups import GroupBy, check_fallback, group_labels
from ..retrieval.pool_calibration import (
    CandidatePool,
    calibrate_from_pools,
    collect_observations,
    label_counts,
)
from .candidates import TunedCandidate, as_candidate, observe_candidates

__all__ = ["DEFAULT_FUSION_GRID", "FUSION_METHODS", "FusionConfig", "TunedCalibration", "calibrate_tuned", "fusion_of"]

#: Fusion methods: ``zscore`` (LlamaIndex ``dist_based_score``) and ``minmax`` (``relative_score``).
FUSION_METHODS = ("zscore", "minmax")


@dataclass(frozen=True)
class FusionConfig:
    """One hybrid setting: score normalisation ``method`` and the dense retriever's ``weight``.

    The lexical (BM25) retriever gets ``1 - weight``.

    Examples
    --------
    >>> FusionConfig("minmax", 0.3).key
    'minmax:0.3'
    >>> FusionConfig.parse("zscore:0.5")
    FusionConfig(method='zscore', weight=0.5)
    """

    method: str
    weight: float

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise CalibrationError(f"Fusion method must be one of {FUSION_METHODS}, got {self.method!r}.")
        if not 0.0 <= float(self.weight) <= 1.0:
            raise CalibrationError(f"Fusion weight must be in [0, 1], got {self.weight}.")

    @property
    def key(self) -> str:
        """``"method:weight"``, as in reports and the CLI."""
        return f"{self.method}:{self.weight:g}"

    @classmethod
    def parse(cls, text: str) -> FusionConfig:
        """Inverse of :attr:`key`."""
        method, sep, weight = text.partition(":")
        if not sep:
            raise CalibrationError(f"Expected 'method:weight' such as 'zscore:0.5', got {text!r}.")
        try:
            value = float(weight)
        except ValueError as exc:
            raise CalibrationError(f"Bad fusion weight in {text!r}.") from exc
        return cls(method.strip(), value)


#: The small grid searched by default: both normalisations, dense weight 0.3 / 0.5 / 0.7.
DEFAULT_FUSION_GRID: tuple[FusionConfig, ...] = tuple(
    FusionConfig(m, w) for m in FUSION_METHODS for w in (0.3, 0.5, 0.7)
)


@dataclass(frozen=True)
class TunedCalibration:
    """The chosen configuration and the calibration made with it.

    Attributes
    ----------
    config : FusionConfig
    calibration : RetrievalCalibration
        ``selection_`` holds the rule, the seed, the split sizes, every candidate's
        mean set size on the optimisation split and the digests of the optimisation
        questions (``optimisation_question_ids``), so a report can leave them out.
    candidate : TunedCandidate
        The chosen unit, fusion setting and pool size.
    """

    config: FusionConfig
    calibration: RetrievalCalibration
    candidate: TunedCandidate | None = None


def calibrate_tuned(
    examples: Sequence[CalibrationExample],
    fetchers: Mapping[FusionConfig, Callable[[str], CandidatePool]],
    fingerprints: Callable[[FusionConfig], Fingerprint],
    *,
    pool_size: int,
    confidence_level: float = 0.9,
    score: str = "auto",
    method: str = "split",
    delta: float | None = None,
    optimisation_fraction: float = 0.3,
    random_state: int = 0,
    strict: bool = False,
    progress: bool = True,
    group_by: GroupBy | None = None,
    group_fallback: str = "keep_all",
    objective: str | None = None,
    base_of: Mapping[Any, Any] | None = None,
    fanout: Callable[[str], Mapping[Any, CandidatePool]] | None = None,
    token_costs: Callable[[CandidatePool], Mapping[str, float]] | None = None,
    unit_examples: Mapping[str, Sequence[CalibrationExample]] | None = None,
) -> TunedCalibration:
    """Choose the configuration (and family) on an optimisation split, calibrate on the rest.

    Parameters
    ----------
    examples : sequence of CalibrationExample
    fetchers : mapping of FusionConfig or TunedCandidate to callable
        ``fetch(question) -> CandidatePool`` of the host built with each configuration
        (a ``FusionConfig`` is the chunk-level candidate at ``pool_size``).
    fingerprints : callable
        ``fingerprints(key) -> Fingerprint`` of that host.
    pool_size : int
        The base pool.
    confidence_level : float, default 0.9
    score : {"auto", "relative", "similarity", "rank"}, default "auto"
        ``auto`` chooses the family together with the configuration; a named family
        tunes the configuration only.
    method : {"split", "pac"}; delta : float, for PAC.
    optimisation_fraction : float, default 0.3
    random_state : int
        Seed of the optimisation/calibration split.
    group_by : str or callable, optional
        Per-group (Mondrian) thresholds on the calibration part (see :mod:`.groups`).
    group_fallback : {"keep_all", "pooled"}, default "keep_all"
        With ``group_by``: what a group too small for its own threshold, or a group not seen
        at calibration, gets: every candidate (threshold ``+inf``), or the pooled threshold,
        marked not guaranteed at query time (as in ``calibrate_retriever``).
    objective : {"size", "tokens"}, optional
        What the choice minimises on the optimisation split; default ``"tokens"`` (mean
        context tokens of the set) when ``token_costs`` is given, else ``"size"``.
    base_of : mapping, optional
        Larger-pool key -> the same setting at the base pool: a larger pool competes only
        when its base pool misses more than ``alpha/2`` of the optimisation questions.
    fanout : callable, optional
        ``fanout(question) -> {key: CandidatePool}``: every candidate's pool from one search
        (the optimisation split is then never queried per candidate).
    token_costs : callable, optional
        ``token_costs(pool) -> {id: context tokens}`` (see :class:`~.tuned_candidates.TokenCosts`).
    unit_examples : mapping of str to sequence of CalibrationExample, optional
        The same questions (same order) with the gold of another unit, e.g. parent ids
        for ``"parent:max"``; a unit not listed uses ``examples``.

    Candidates whose pool misses more than ``alpha`` of the optimisation
    questions cannot reach ``1 - alpha`` and are left out when another candidate can
    (``selection_["infeasible"]``).

    Returns
    -------
    TunedCalibration

    Raises
    ------
    CalibrationError
        Empty grid, or a calibration part too small for the finite-sample rank.

    Examples
    --------
    >>> tuned = calibrate_tuned(examples, fetchers, fingerprint_of, pool_size=50)  # doctest: +SKIP
    >>> tuned.config.key, tuned.calibration.selection_["rule"]  # doctest: +SKIP
    ('zscore:0.5', 'tuned-hybrid')
    """
    if not fetchers:
        raise CalibrationError("The fusion grid is empty; pass at least one FusionConfig.")
    alpha = 1.0 - check_alpha(confidence_level, "confidence_level")
    alpha = check_alpha(round(alpha, 12))
    if not 0.0 < optimisation_fraction < 1.0:
        raise CalibrationError(f"optimisation_fraction must be in (0, 1), got {optimisation_fraction}.")
    families = SCORE_FAMILIES if score == "auto" else (score,)
    if score != "auto" and score not in SCORE_FAMILIES:
        raise CalibrationError(f"score must be 'auto' or one of {SCORE_FAMILIES}, got {score!r}.")
    examples = list(examples)
    group_fallback = check_fallback(group_fallback)
    if group_by is not None:
        group_labels(examples, group_by)  # a missing key or a raising function fails before any query
    if objective is not None and objective not in OBJECTIVES:
        raise CalibrationError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    bad = [u for u, ex in (unit_examples or {}).items() if len(ex) != len(examples)]
    if bad:
        raise CalibrationError(f"unit_examples[{bad[0]!r}] must hold the same {len(examples)} questions, in order.")
    opt_idx, cal_idx = split_examples(
        list(range(len(examples))), (optimisation_fraction, 1.0 - optimisation_fraction), seed=random_state
    )
    opt, cal = [examples[i] for i in opt_idx], [examples[i] for i in cal_idx]  # as split_examples(examples, ...)
    need = min_calibration_size(alpha)
    if len(cal) < need or not opt:
        raise CalibrationError(
            f"{len(examples)} questions leave {len(opt)} for tuning and {len(cal)} for calibration; alpha={alpha:g} "
            f"needs at least {need} calibration questions after the optimisation split. Label more questions "
            "or lower confidence_level."
        )
    cands = {key: as_candidate(key, pool_size) for key in fetchers}
    names = {key: cands[key].label(pool_size) for key in fetchers}

    def unit_ex(key: Any) -> Sequence[CalibrationExample]:
        return (unit_examples or {}).get(cands[key].unit, examples)

    observed = observe_candidates(
        {k: [unit_ex(k)[i] for i in opt_idx] for k in fetchers},
        fetchers,
        fanout=fanout,
        token_costs=token_costs,
        progress=progress,
    )
    by_name = {names[k]: obs for k, obs in observed.items()}
    objective = objective or ("tokens" if token_costs is not None else "size")
    bases = {names[k]: names[b] for k, b in (base_of or {}).items()}
    choice = choose_configuration(by_name, alpha, families=families, objective=objective, base_of=bases)
    key = next(k for k in fetchers if names[k] == choice.config)
    chosen, config = cands[key], cands[key].fusion
    calibration = calibrate_from_pools(
        collect_observations([unit_ex(key)[i] for i in cal_idx], fetchers[key], progress=progress),
        fingerprint=fingerprints(key),
        pool_size=chosen.pool_size,
        confidence_level=confidence_level,
        score=choice.family,
        method=method,
        delta=delta,
        random_state=random_state,
        strict=strict,
        labels=label_counts(unit_ex(key)),
        group_labels=group_labels(cal, group_by) if group_by is not None else None,
        group_by=group_by,
        group_fallback=group_fallback,
    )
    what = "mean context tokens" if objective == "tokens" else "mean set size"
    selection = {
        "rule": "tuned-hybrid",
        "objective": f"{what} on the optimisation split",
        "seed": random_state,
        "n_optimisation": len(opt),
        # the questions that chose the host: a held-out check must leave them out too
        "optimisation_question_ids": optimisation_ids(opt, cal),
        "fusion_method": config.method,
        "dense_weight": config.weight,
        "chosen": choice.family,
        "grid": choice.mean_sizes,
        "tuning_objective": objective,
        "unit": chosen.unit,
        "pool_size": chosen.pool_size,
        "candidate": choice.config,
        "units": sorted({c.unit for c in cands.values()}),
        "pool_sizes": sorted({c.pool_size for c in cands.values()}),
        "mean_tokens": choice.mean_tokens,
        "skipped": list(choice.skipped),
        "infeasible": sorted(choice.infeasible),
    }
    return TunedCalibration(config, replace(calibration, selection_=selection), chosen)


def fusion_of(calibration: RetrievalCalibration) -> FusionConfig:
    """The fusion setting a tuned-hybrid calibration chose.

    Raises
    ------
    CalibrationError
        The calibration was not made by :func:`calibrate_tuned`.

    Examples
    --------
    >>> fusion_of(cal).key  # doctest: +SKIP
    'zscore:0.5'
    """
    sel = calibration.selection_
    if sel.get("rule") != "tuned-hybrid":
        raise CalibrationError(
            "This calibration was not made by calibrate_hybrid_retriever (no tuned fusion setting in selection_); "
            "build its host as it was calibrated."
        )
    return FusionConfig(str(sel["fusion_method"]), float(sel["dense_weight"]))
