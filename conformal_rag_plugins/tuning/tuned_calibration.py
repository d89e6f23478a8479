"""Tune a hybrid host (fusion method, dense weight) and the score family, then calibrate.

The labelled questions are split with a seed into an optimisation part and a disjoint calibration
part; every candidate is queried on the first only and the smallest mean set (or context tokens)
wins (:func:`~conformal_rag_plugins.core.config_search.choose_configuration`); only the chosen host
is queried on the calibration part, which the choice never saw, so the split-conformal guarantee
holds for it. Its fingerprint records the fusion setting, so another setting is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.config_search import OBJECTIVES, choose_configuration
from ..core.errors import CalibrationError
from ..core.quantile import min_calibration_size
from ..core.retrieval_scores import SCORE_FAMILIES
from ..core.validation import alpha_from_confidence_level
from ..datasets.examples import CalibrationExample, split_examples
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.conformalizer import calibrate_from_pools, optimisation_ids
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.group_check import with_group_questions
from ..retrieval.groups import check_fallback, group_labels
from ..retrieval.options import RetrievalOptions
from ..retrieval.pool_calibration import CandidatePool, collect_observations, label_counts
from .candidates import CandidateSearch, TunedCandidate, as_candidate, observe_candidates
from .fusion_config import FusionConfig
from .options import TuningOptions


@dataclass(frozen=True)
class TunedCalibration:
    """The chosen configuration and candidate, and the calibration made with it.

    ``calibration.selection_`` holds the rule, seed, split sizes, every candidate's mean set size and
    the optimisation questions' digests (``optimisation_question_ids``) so a report can leave them out.
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
    options: RetrievalOptions | None = None,
    tuning: TuningOptions | None = None,
    search: CandidateSearch | None = None,
) -> TunedCalibration:
    """Choose the configuration (and family) on an optimisation split, calibrate on the rest.

    Candidates whose pool misses more than ``alpha`` of the optimisation questions cannot reach
    ``1 - alpha`` and are left out when another can (``selection_["infeasible"]``).

    Parameters
    ----------
    fetchers : mapping of FusionConfig or TunedCandidate to callable
        ``fetch(question) -> CandidatePool`` per candidate (a ``FusionConfig`` is the chunk-level
        candidate at ``pool_size``, the base pool); ``fingerprints(key)`` gives its fingerprint.
    options : RetrievalOptions, optional
        As ``calibrate_retriever``; ``score="auto"`` (default) chooses the family too and
        ``random_state`` seeds the split. Neither ``chunk_group_key`` nor ``control="recall"``.
    tuning : TuningOptions, optional
        ``optimisation_fraction`` (default 0.3) and ``objective`` (default ``"tokens"`` with
        ``search.token_costs``, else ``"size"``); ``grid``/``pool_sizes`` are read by the adapters.
    search : CandidateSearch, optional
        ``base_of``, ``fanout``, ``token_costs``, ``unit_examples``.

    Raises
    ------
    CalibrationError
        Empty grid, or a calibration part too small for the finite-sample rank.
    """
    opts = options if options is not None else RetrievalOptions()
    tune = tuning if tuning is not None else TuningOptions()
    found = search if search is not None else CandidateSearch()
    confidence_level, score, group_by = opts.confidence_level, opts.family("auto"), opts.group_by
    optimisation_fraction, objective, random_state = tune.optimisation_fraction, tune.objective, opts.random_state
    base_of, token_costs, unit_examples = found.base_of, found.token_costs, found.unit_examples
    if opts.chunk_group_key is not None or opts.control != "coverage":
        raise CalibrationError("The tuned calibration supports neither chunk_group_key nor control='recall'.")
    if not fetchers:
        raise CalibrationError("The fusion grid is empty; pass at least one FusionConfig.")
    alpha = alpha_from_confidence_level(confidence_level)
    if not 0.0 < optimisation_fraction < 1.0:
        raise CalibrationError(f"optimisation_fraction must be in (0, 1), got {optimisation_fraction}.")
    families = SCORE_FAMILIES if score == "auto" else (score,)
    if score != "auto" and score not in SCORE_FAMILIES:
        raise CalibrationError(f"score must be 'auto' or one of {SCORE_FAMILIES}, got {score!r}.")
    examples = list(examples)
    check_fallback(opts.group_fallback)
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
        fanout=found.fanout,
        token_costs=token_costs,
        progress=opts.progress,
    )
    by_name = {names[k]: obs for k, obs in observed.items()}
    objective = objective or ("tokens" if token_costs is not None else "size")
    bases = {names[k]: names[b] for k, b in (base_of or {}).items()}
    choice = choose_configuration(
        by_name, alpha, families=families, objective=objective, base_of=bases, n_calibration=len(cal)
    )
    key = next(k for k in fetchers if names[k] == choice.config)
    chosen, config = cands[key], cands[key].fusion
    calibration = calibrate_from_pools(
        collect_observations([unit_ex(key)[i] for i in cal_idx], fetchers[key], progress=opts.progress),
        fingerprint=fingerprints(key),
        pool_size=chosen.pool_size,
        options=replace(opts, score=choice.family),
        labels=label_counts(unit_ex(key)),
        group_labels=group_labels(cal, group_by) if group_by is not None else None,
    )
    calibration = with_group_questions(calibration, cal, group_by)  # a function's inputs, to rerun it at query time
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
    """The fusion setting a tuned-hybrid calibration chose (:class:`CalibrationError` for any other calibration)."""
    sel = calibration.selection_
    if sel.get("rule") != "tuned-hybrid":
        raise CalibrationError(
            "This calibration was not made by calibrate_hybrid_retriever (no tuned fusion setting in selection_); "
            "build its host as it was calibrated."
        )
    return FusionConfig(str(sel["fusion_method"]), float(sel["dense_weight"]))
