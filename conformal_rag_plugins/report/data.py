"""The numbers behind the calibration report's figures, from held-out candidate pools.

Thresholds are :func:`~conformal_rag_plugins.core.quantile.conformal_quantile` of the calibration's
own scores; nothing is re-fitted on the held-out questions except the CONFLARE baseline, which is
cross-fitted on two halves of them (its rule needs gold distances).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.baselines import conflare_threshold
from ..core.coverage_band import split_conformal_band
from ..core.errors import CalibrationError, InfiniteThresholdWarning
from ..core.pools import PoolObservation
from ..core.quantile import conformal_quantile, conformal_rank, flagged_rank, threshold_rule
from ..core.validation import alpha_from_confidence_level
from ..storage.jsonio import encode_float

if TYPE_CHECKING:
    from ..answer_sets.calibration import AnswerSetCalibration
    from ..retrieval.calibration import RetrievalCalibration


#: The grid of confidence levels 1 - alpha of the coverage figure (the calibrated level is added).
DEFAULT_LEVELS: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))
BAND = "central 95% of Beta-Binomial(n_test, k, n+1-k)/n_test, k = ceil((n+1)(1-alpha)) (exact split conformal)"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else encode_float(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _quantile(scores: Sequence[float], alpha: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return conformal_quantile(scores, alpha)


def _cover(observations: Sequence[PoolObservation], family: str, threshold: float) -> tuple[list[bool], list[int]]:
    pairs = [o.covered_and_size(family, threshold) for o in observations]
    return [c for c, _ in pairs], [s for _, s in pairs]


def _check_observations(observations: Sequence[PoolObservation]) -> list[PoolObservation]:
    obs = list(observations)
    if not obs:
        raise CalibrationError("No held-out questions: the report needs at least one held-out question's pool.")
    return obs


@dataclass(frozen=True)
class CoverageGrid:
    """Held-out coverage against 1 - alpha on a grid of levels, with the exact band.

    ``band_low``/``band_high`` are NaN where the threshold is ``+inf`` (no guarantee, whole pool kept).
    ``ranks[i]`` is ``ceil((n+1) levels[i])``; ``n_at_or_below[i]`` above it means ties at the
    threshold, which lift coverage (see :func:`tie_levels`).
    """

    levels: tuple[float, ...]
    coverage: tuple[float, ...]
    band_low: tuple[float, ...]
    band_high: tuple[float, ...]
    thresholds: tuple[float, ...]
    mean_set_size: tuple[float, ...]
    family: str
    n_calibration: int
    n_test: int
    calibrated_level: float
    band: str = BAND
    ranks: tuple[int, ...] = ()
    n_at_or_below: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``+inf`` as ``"+inf"``, NaN as ``null``)."""
        return _jsonable(asdict(self))


def coverage_grid(
    calibration: RetrievalCalibration,
    observations: Sequence[PoolObservation],
    levels: Sequence[float] = DEFAULT_LEVELS,
) -> CoverageGrid:
    """Thresholds from the calibration's stored scores at every level, and their held-out coverage.

    Under the calibration's own threshold rule (``threshold_rule_``): a file saved under the plain rank
    is checked at the thresholds it serves.
    """
    obs = _check_observations(observations)
    grid = sorted({round(float(x), 6) for x in levels} | {round(calibration.confidence_level_, 6)})
    cov, low, high, qs, sizes, ranks, at_or_below = [], [], [], [], [], [], []
    n = len(calibration.scores_)
    for level in grid:
        checked, (lo, hi) = _level_check(calibration, level, len(obs))
        covered, size = _cover(obs, calibration.score_family_, checked.threshold)
        cov.append(float(np.mean(covered)))
        sizes.append(float(np.mean(size)))
        low.append(lo)
        high.append(hi)
        qs.append(checked.threshold)
        ranks.append(checked.rank)
        at_or_below.append(checked.n_at_or_below)
    return CoverageGrid(
        tuple(grid), tuple(cov), tuple(low), tuple(high), tuple(qs), tuple(sizes),
        calibration.score_family_, n, len(obs), round(calibration.confidence_level_, 6),
        ranks=tuple(ranks), n_at_or_below=tuple(at_or_below),
    )  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """Whether held-out coverage at one level is what a correct calibration gives.

    ``status``: ``"inside"`` the 95% band (consistent), ``"below"`` (not consistent), ``"above"``
    (the guarantee is a lower bound, so not contradicted; ``text`` says why, e.g. ties) or
    ``"no_band"`` (threshold ``+inf``: calibration too small for the level). ``consistent`` is
    ``True``, ``False`` or ``None`` accordingly.
    """

    status: str
    text: str
    consistent: bool | None
    coverage: float
    target: float
    band_low: float
    band_high: float
    n_test: int
    n_calibration: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN band ends as ``null``)."""
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class ThresholdRank:
    """The threshold a verdict checks, its rank ``ceil((n + 1)(1 - alpha))`` and the calibration scores ``<=`` it.

    More scores at or below than ``rank`` means ties at the threshold, which explain coverage above the band.

    Examples
    --------
    >>> ThresholdRank(0.3, rank=271, n_at_or_below=290).n_at_or_below > 271
    True
    """

    threshold: float = 0.0
    rank: int | None = None
    n_at_or_below: int | None = None


_UNRANKED = ThresholdRank()


def _level_check(
    calibration: RetrievalCalibration, level: float, n_test: int
) -> tuple[ThresholdRank, tuple[float, float]]:
    """The split-conformal threshold of the stored scores at ``level``, its rank, and the 95% band for ``n_test``."""
    n, alpha = len(calibration.scores_), alpha_from_confidence_level(level, "level")
    misses = sum(1 for r in calibration.scores_ if math.isinf(r))
    with threshold_rule(calibration.threshold_rule_):  # the rule the file's thresholds follow (older: plain rank)
        q = _quantile(calibration.scores_, alpha)
        rank = flagged_rank(n, alpha)
        band = split_conformal_band(n, n_test, alpha, misses=misses)
    used = None if rank is None else rank.rank_for(misses)
    checked = ThresholdRank(
        q,
        rank=conformal_rank(n, alpha) if used is None else used,
        n_at_or_below=sum(1 for r in calibration.scores_ if r <= q),
    )
    return checked, band


def coverage_verdict(
    coverage: float,
    target: float,
    band: tuple[float, float],
    *,
    n_test: int,
    n_calibration: int,
    threshold: ThresholdRank = _UNRANKED,
    stage: str = "",
) -> Verdict:
    """The verdict line for held-out ``coverage`` at ``target`` = 1 - alpha, against its 95% ``band``.

    ``band`` is NaN when the rank exceeds ``n_calibration`` (threshold ``+inf``); ``stage`` prefixes
    the text (e.g. ``"retrieval-stage "``).

    Examples
    --------
    >>> coverage_verdict(0.904, 0.9, (0.847, 0.946), n_test=300, n_calibration=300).text
    'held-out coverage 0.904 at target 0.9, inside the 95% band [0.847, 0.946]: consistent with the guarantee'
    >>> coverage_verdict(0.80, 0.9, (0.847, 0.946), n_test=300, n_calibration=300).status
    'below'
    """
    lo, hi = band
    q, rank, n_at_or_below = threshold.threshold, threshold.rank, threshold.n_at_or_below
    head = f"{stage}held-out coverage {coverage:.3f} at target {target:g}"
    where = f"the 95% band [{lo:.3f}, {hi:.3f}]"
    pool = " The threshold is +inf (too many misses): the whole pool is kept." if math.isinf(q) else ""
    if math.isnan(lo) or math.isnan(hi):
        status, consistent = "no_band", None
        text = (
            f"{head}: no band to check, because {n_calibration} calibration questions are too few for this level "
            "(the rank ceil((n+1)(1-alpha)) exceeds n), so the threshold is +inf and every candidate is kept; "
            "no guarantee is claimed beyond what the pool holds"
        )
    elif coverage < lo:
        status, consistent = "below", False
        text = (
            f"{head}, below {where}: not consistent with the guarantee. A correct calibration lands this low in "
            "fewer than 2.5% of draws: the held-out questions may differ from the calibration ones (not "
            "exchangeable), or the host changed since calibration"
        )
    elif coverage > hi:
        status, consistent = "above", True
        ties = rank is not None and n_at_or_below is not None and n_at_or_below > rank and not math.isinf(q)
        if ties:
            text = (
                f"{head}, above {where}: consistent with the guarantee, which is a lower bound. Scores tie at the "
                f"threshold: {n_at_or_below} of the {n_calibration} calibration scores are at or below it where the "
                f"rank needs {rank}, so the sets keep more than the level asks and cover about "
                f"{n_at_or_below / (n_calibration + 1):.3f}"
            )
        else:
            text = (
                f"{head}, above {where}: consistent with the guarantee, which is a lower bound, but higher than a "
                "correct calibration gives in 97.5% of draws with no ties at the threshold: the held-out questions "
                "may be easier than the calibration ones, and the sets larger than they need to be"
            )
    else:
        status, consistent = "inside", True
        text = f"{head}, inside {where}: consistent with the guarantee"
    return Verdict(status, text + pool, consistent, coverage, target, lo, hi, n_test, n_calibration)


def grid_verdict(grid: CoverageGrid, stage: str = "") -> Verdict:
    """The :func:`coverage_verdict` of ``grid`` at its calibrated level."""
    at = grid.levels.index(grid.calibrated_level)
    return _level_verdict(grid, at, stage)


def _level_verdict(grid: CoverageGrid, at: int, stage: str = "") -> Verdict:
    checked = ThresholdRank(
        grid.thresholds[at],
        rank=grid.ranks[at] if grid.ranks else None,
        n_at_or_below=grid.n_at_or_below[at] if grid.n_at_or_below else None,
    )
    return coverage_verdict(
        grid.coverage[at], grid.levels[at], (grid.band_low[at], grid.band_high[at]), n_test=grid.n_test,
        n_calibration=grid.n_calibration, threshold=checked, stage=stage,
    )  # fmt: skip


def served_note(stage: RetrievalCalibration) -> str:
    """Said after the verdict when the calibration serves another threshold than the one checked."""
    served = []
    if stage.method_ != "split" or stage.risk_ != "miscoverage":
        served.append(f"its {stage.method_} threshold")
    if stage.groups_:
        served.append("one threshold per group")
    if not served:
        return ""
    return (
        "; this checks the split-conformal threshold of the stored scores at the same level, while the calibration "
        f"serves {' and '.join(served)}"
    )


def stale_rule_note(calibration: RetrievalCalibration) -> str:
    """Said after the verdict of a file saved under an older threshold rule: its sets are never flagged guaranteed.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> scores = tuple(i / 20 for i in range(1, 21))
    >>> old = RetrievalCalibration(0.95, 0.1, "split", "similarity", 5, 20, 0, scores, fp,
    ...                            threshold_rule_="plain-rank")
    >>> "never flagged guaranteed" in stale_rule_note(old), stale_rule_note(old.with_current_rule())
    (True, '')
    """
    if not calibration.stale_rule_reason_:
        return ""
    what = (
        "before thresholds accounted for pool misses"
        if calibration.threshold_rule_ == "plain-rank"
        else "whose flag is not withdrawn when the pool misses more than it assumes"
    )
    return (
        f"; but it was saved under the threshold rule {calibration.threshold_rule_!r}, {what}, so its sets are never "
        "flagged guaranteed: re-calibrate, or recompute it from its stored scores with "
        "calibration.with_current_rule() and save it"
    )


def calibrated_verdict(calibration: RetrievalCalibration, coverage: float, n_test: int, stage: str = "") -> Verdict:
    """The report's verdict on held-out ``coverage`` of ``n_test`` questions at the calibrated level.

    The same band, rank and text as :func:`grid_verdict` of :func:`coverage_grid` at
    ``calibration.confidence_level_`` (with the notes of :func:`served_note` and :func:`stale_rule_note`),
    for a coverage measured elsewhere, e.g. on the sets a retriever served.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> scores = tuple(i / 100 for i in range(1, 100))
    >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 99, 0, scores, fp)
    >>> calibrated_verdict(cal, 0.9, n_test=200).text
    'held-out coverage 0.900 at target 0.9, inside the 95% band [0.820, 0.960]: consistent with the guarantee'
    >>> calibrated_verdict(cal, 0.7, n_test=200).status
    'below'
    """
    if n_test < 1:
        raise CalibrationError("No held-out questions: the verdict needs at least one held-out question.")
    level = round(calibration.confidence_level_, 6)
    checked, band = _level_check(calibration, level, n_test)
    verdict = coverage_verdict(
        coverage, level, band, n_test=n_test, n_calibration=len(calibration.scores_), threshold=checked, stage=stage
    )
    return replace(verdict, text=verdict.text + served_note(calibration) + stale_rule_note(calibration))


@dataclass(frozen=True)
class TieLevel:
    """A level of the grid whose held-out coverage lies above its band, and why."""

    level: float
    coverage: float
    band_high: float
    threshold: float
    rank: int
    n_at_or_below: int
    ties: bool
    text: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return _jsonable(asdict(self))


def tie_levels(grid: CoverageGrid) -> list[TieLevel]:
    """The grid levels above their band, each explained (ties at the threshold or not).

    With a discrete score (``rank``) or a shared value (``relative``: gold ranked first scores 0), the
    threshold at a low level is that value, more than the rank of the scores reach it, and coverage is
    lifted to about ``n_at_or_below / (n + 1)``.
    """
    out = []
    for i, level in enumerate(grid.levels):
        hi = grid.band_high[i]
        if math.isnan(hi) or grid.coverage[i] <= hi:
            continue
        v = _level_verdict(grid, i)
        ties = bool(grid.ranks) and grid.n_at_or_below[i] > grid.ranks[i] and math.isfinite(grid.thresholds[i])
        out.append(
            TieLevel(level, grid.coverage[i], hi, grid.thresholds[i], grid.ranks[i] if grid.ranks else 0,
                     grid.n_at_or_below[i] if grid.n_at_or_below else 0, ties, v.text)
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class MethodSizes:
    """Set sizes of one rule on the held-out questions, and its held-out coverage."""

    label: str
    sizes: tuple[int, ...]
    coverage: float
    threshold: float | None = None

    @property
    def mean_size(self) -> float:
        """Mean set size."""
        return float(np.mean(self.sizes))


@dataclass(frozen=True)
class SetSizeComparison:
    """Set sizes at the calibrated level: the conformal rule, fixed top-k and CONFLARE's rule."""

    level: float
    family: str
    pool_size: int
    methods: dict[str, MethodSizes]

    def histogram(self, method: str) -> dict[int, int]:
        """``{size: number of held-out questions}`` for ``method``."""
        values, counts = np.unique(np.asarray(self.methods[method].sizes), return_counts=True)
        return {int(v): int(c) for v, c in zip(values, counts, strict=True)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with every method's histogram, mean size and coverage."""
        return _jsonable(
            {
                "level": self.level,
                "family": self.family,
                "pool_size": self.pool_size,
                "methods": {
                    name: {
                        "label": m.label,
                        "coverage": m.coverage,
                        "mean_size": m.mean_size,
                        "threshold": m.threshold,
                        "histogram": {str(k): v for k, v in self.histogram(name).items()},
                    }
                    for name, m in self.methods.items()
                },
            }
        )


def _conflare_crossfit(obs: Sequence[PoolObservation], alpha: float, seed: int) -> tuple[list[bool], list[int]]:
    """CONFLARE's rule, fitted on one half of the held-out questions and applied to the other (both ways)."""
    order = np.random.default_rng(seed).permutation(len(obs))
    halves = [order[: len(obs) // 2], order[len(obs) // 2 :]]
    covered, sizes = [False] * len(obs), [0] * len(obs)
    for fit, apply in ((halves[0], halves[1]), (halves[1], halves[0])):
        distances = [d for d in (obs[i].score("similarity") for i in fit) if math.isfinite(d)]
        q = conflare_threshold(distances, alpha) if distances else math.inf
        for i in apply:
            mask = -obs[i].scores < q  # CONFLARE keeps distance < threshold
            covered[i] = any(mask[p] for p in obs[i].gold_positions)
            sizes[i] = int(mask.sum())
    return covered, sizes


def set_size_comparison(
    calibration: RetrievalCalibration,
    observations: Sequence[PoolObservation],
    *,
    topk: Sequence[int] = (1, 5, 10),
    seed: int = 0,
) -> SetSizeComparison:
    """Held-out set sizes of the calibrated threshold, of fixed top-k, and of CONFLARE's rule.

    CONFLARE needs gold distances, which another score family's calibration does not store, so it is
    cross-fitted on two seeded halves of the held-out questions at the same alpha (misses dropped).
    """
    obs = _check_observations(observations)
    pool = max(calibration.pool_size_, max(len(o.scores) for o in obs))
    covered, sizes = _cover(obs, calibration.score_family_, calibration.threshold_)
    methods = {
        "conformal": MethodSizes(
            f"conformal ({calibration.score_family_})", tuple(sizes), float(np.mean(covered)), calibration.threshold_
        )
    }
    for k in topk:
        covered, sizes = _cover(obs, "rank", float(k))
        methods[f"topk@{k}"] = MethodSizes(f"top-{k}", tuple(sizes), float(np.mean(covered)), float(k))
    covered, sizes = _conflare_crossfit(obs, calibration.alpha_, seed)
    methods["conflare"] = MethodSizes("CONFLARE rule (cross-fitted)", tuple(sizes), float(np.mean(covered)))
    return SetSizeComparison(round(calibration.confidence_level_, 6), calibration.score_family_, pool, methods)


@dataclass(frozen=True)
class ScoreDistribution:
    """The calibration scores, the threshold, and the misses (gold outside the pool, score ``+inf``)."""

    scores: tuple[float, ...]
    threshold: float
    alpha: float
    family: str
    n_calibration: int
    n_misses: int
    heldout_scores: tuple[float, ...] = ()
    heldout_misses: int = 0

    @property
    def n_above(self) -> int:
        """Calibration scores above the threshold (misses included): the calibration questions not covered."""
        return int(sum(1 for s in self.scores if s > self.threshold)) + self.n_misses

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (finite scores only; misses are counted)."""
        return _jsonable(asdict(self) | {"n_above_threshold": self.n_above})


def score_distribution(
    calibration: RetrievalCalibration, observations: Sequence[PoolObservation] | None = None
) -> ScoreDistribution:
    """The calibration's stored scores split into finite ones and misses, with held-out scores if given.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> scores = tuple(i / 10 for i in range(1, 10)) + (float("inf"),)
    >>> cal = RetrievalCalibration(float("inf"), 0.1, "split", "similarity", 5, 10, 1, scores, fp)
    >>> d = score_distribution(cal)
    >>> d.n_misses, len(d.scores)
    (1, 9)
    """
    finite = tuple(float(s) for s in calibration.scores_ if math.isfinite(s))
    held: tuple[float, ...] = ()
    held_misses = 0
    if observations is not None:
        raw = [o.score(calibration.score_family_) for o in observations]
        held = tuple(float(s) for s in raw if math.isfinite(s))
        held_misses = len(raw) - len(held)
    return ScoreDistribution(
        finite, calibration.threshold_, calibration.alpha_, calibration.score_family_, len(calibration.scores_),
        len(calibration.scores_) - len(finite), held, held_misses,
    )  # fmt: skip


@dataclass(frozen=True)
class AnswerSetSummary:
    """An answer-set calibration's coverage ceiling and, per combination method, its held-out retrieval sets.

    ``methods[name]`` holds both alphas and thresholds, ``guaranteed``, ``coverage``, ``mean_size`` and
    ``sizes``, or ``error`` when it cannot be computed from these scores.
    """

    alpha: float
    calibrated_method: str
    coverage_ceiling: float
    generator_target: float
    n_calibration: int
    n_generator_misses: int
    methods: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (sizes as histograms)."""
        out = asdict(self)
        for m in out["methods"].values():
            if "sizes" in m:
                values, counts = np.unique(np.asarray(m.pop("sizes")), return_counts=True)
                m["histogram"] = {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)}
        return _jsonable(out)


def answer_set_summary(
    calibration: AnswerSetCalibration, observations: Sequence[PoolObservation], *, delta: float = 0.1
) -> AnswerSetSummary:
    """Recompute every combination method (Bonferroni, PAC, HMP) from the calibration's two stages' scores.

    The calibrated method keeps its settings; the others use the equal alpha split, ``delta`` for PAC
    (the calibration's own when it is PAC) and weight 0.5 for HMP.
    """
    from ..answer_sets.calibration import ANSWER_SET_METHODS, AnswerSetCalibration
    from ..answer_sets.options import SplitOptions

    obs = _check_observations(observations)
    family = calibration.retrieval_.score_family_
    methods: dict[str, dict[str, Any]] = {}
    for name in ANSWER_SET_METHODS:
        own = name == calibration.method_
        try:
            split = SplitOptions(method=name, delta=(calibration.delta_ or delta) if name == "pac" else None)
            fitted = calibration if own else AnswerSetCalibration.from_stages(
                calibration.retrieval_, calibration.generation_scores_, alpha=calibration.alpha_, split=split,
                n_samples=calibration.n_samples_, model=calibration.model_, clustering=calibration.clustering_,
                provenance=calibration.provenance_,  # the same generator record: checked at query time alike
            )  # fmt: skip
        except CalibrationError as exc:
            methods[name] = {"error": str(exc)}
            continue
        stage = fitted.retrieval_stage()
        covered, sizes = _cover(obs, family, stage.threshold_)
        methods[name] = {
            "alpha_retrieval": fitted.alpha_retrieval_,
            "alpha_generation": fitted.alpha_generation_,
            "retrieval_threshold": fitted.retrieval_threshold_,
            "generation_threshold": fitted.generation_threshold_,
            "guaranteed": fitted.guaranteed_,
            "generator_reachable": fitted.generator_reachable_,
            "coverage": float(np.mean(covered)),
            "mean_size": float(np.mean(sizes)),
            "sizes": tuple(sizes),
        }
    gen = calibration.generation_scores_
    return AnswerSetSummary(
        calibration.alpha_, calibration.method_, calibration.coverage_ceiling_, 1.0 - calibration.alpha_generation_,
        len(gen), sum(1 for s in gen if not math.isfinite(s)), methods,
    )  # fmt: skip
