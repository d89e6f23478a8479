"""Coverage *given the guaranteed flag* on seeded synthetic pools that can miss the gold.

Each draw calibrates :class:`~conformal_rag_plugins.retrieval.conformalizer.RetrievalConformalizer` on ``n``
fresh questions whose pool of ``pool_size`` candidates misses the gold with probability ``miss_rate``
(independently), then serves ``n_test`` fresh questions: a draw whose threshold is finite says
``guaranteed``, and the figures are taken over those draws only, as a user reads the flag per answer.
``rule`` chooses the threshold rule (the current one, or the plain rank as a negative control). The
benchmark ``benchmarks/flag_coverage.py`` and ``tests/evaluation/test_flag_trials.py`` use it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.combination import bonferroni_thresholds
from ..core.errors import GuaranteeCutWarning, InfiniteThresholdWarning, PoolMissWarning, SmallGroupWarning
from ..core.pools import PoolObservation
from ..core.quantile import THRESHOLD_RULE, threshold_rule
from ..retrieval.conformalizer import RetrievalConformalizer
from ..retrieval.fingerprint import Fingerprint

_FINGERPRINT = Fingerprint("none", "synthetic", "cosine", "uniform", 1, "cosine")


@dataclass(frozen=True)
class FlagTrial:
    """One setting's figures over the draws whose threshold was flagged guaranteed.

    ``coverage`` is the share of the flagged draws' test questions whose gold was kept (``nan`` when no
    draw was flagged), ``se`` its standard error over draws, ``mean_size`` the mean number of candidates kept.
    """

    n: int
    miss_rate: float
    draws: int
    flag_rate: float
    coverage: float
    se: float
    mean_size: float


def _pool(rng: np.random.Generator, miss_rate: float, pool_size: int, n_gold: int = 1) -> PoolObservation:
    scores = np.sort(rng.random(pool_size))[::-1]
    positions = sorted({min(int(rng.geometric(0.3)) - 1, pool_size - 1) for _ in range(n_gold)})
    kept = tuple(p for p in positions if rng.random() >= miss_rate)
    return PoolObservation(scores, kept, n_gold=len(positions) if n_gold > 1 else None)


def _means(kept: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Mean coverage and mean set size of one draw's test questions."""
    return float(np.mean([c for c, _ in kept])), float(np.mean([s for _, s in kept]))


def _summary(n: int, miss_rate: float, draws: int, flagged: list[tuple[float, float]]) -> FlagTrial:
    if not flagged:
        return FlagTrial(n, miss_rate, draws, 0.0, math.nan, math.nan, math.nan)
    cov = np.array([c for c, _ in flagged])
    size = np.array([s for _, s in flagged])
    se = float(cov.std(ddof=1) / math.sqrt(cov.size)) if cov.size > 1 else math.nan
    return FlagTrial(n, miss_rate, draws, cov.size / draws, float(cov.mean()), se, float(size.mean()))


@dataclass(frozen=True)
class _Draws:
    draws: int
    seed: int
    n_test: int
    pool_size: int
    rule: str
    n_gold: int = 1


def _pooled_draws(
    n: int,
    miss_rate: float,
    conformalizer: RetrievalConformalizer,
    settings: _Draws,
    serve: Callable[[PoolObservation, float], tuple[float, int]],
) -> FlagTrial:
    """Per draw: ``n`` calibration pools, ``n_test`` test pools, one threshold; ``serve`` scores a flagged draw."""
    draws, n_test, pool_size, n_gold = settings.draws, settings.n_test, settings.pool_size, settings.n_gold
    rng = np.random.default_rng(settings.seed)
    flagged = []
    with threshold_rule(settings.rule), warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        warnings.simplefilter("ignore", PoolMissWarning)
        for _ in range(draws):
            cal = [_pool(rng, miss_rate, pool_size, n_gold) for _ in range(n)]
            test = [_pool(rng, miss_rate, pool_size, n_gold) for _ in range(n_test)]
            q = conformalizer.conformalize_pools(cal, fingerprint=_FINGERPRINT, pool_size=pool_size).threshold_
            if math.isinf(q):
                continue
            flagged.append(_means([serve(o, q) for o in test]))
    return _summary(n, miss_rate, draws, flagged)


def simulate_flag_coverage(
    n: int,
    confidence_level: float,
    miss_rate: float,
    *,
    draws: int,
    seed: int = 0,
    n_test: int = 20,
    pool_size: int = 20,
    rule: str = THRESHOLD_RULE,
) -> FlagTrial:
    """Coverage and set size given the flag of the pooled split threshold (``score="similarity"``).

    Examples
    --------
    >>> t = simulate_flag_coverage(50, 0.9, 0.05, draws=20, seed=1)
    >>> t.draws, 0 < t.flag_rate <= 1, t.mean_size < 20
    (20, True, True)
    """

    def serve(pool: PoolObservation, q: float) -> tuple[float, int]:
        return pool.covered_and_size("similarity", q)

    conformalizer = RetrievalConformalizer(confidence_level, score="similarity")
    return _pooled_draws(n, miss_rate, conformalizer, _Draws(draws, seed, n_test, pool_size, rule), serve)


def simulate_group_flag_coverage(
    group_sizes: Sequence[int],
    confidence_level: float,
    miss_rate: float | Sequence[float],
    *,
    draws: int,
    seed: int = 0,
    n_test: int = 20,
    pool_size: int = 20,
    rule: str = THRESHOLD_RULE,
) -> list[FlagTrial]:
    """The same per group (Mondrian, ``groups=``): each group's test questions given that group's own flag.

    ``miss_rate`` is one rate for every group or one per group. The label-conditional form
    (``chunk_group_key``) computes its per-group thresholds with the same
    :func:`~conformal_rag_plugins.core.mondrian.group_thresholds`, so these figures hold for it too.
    """
    rng = np.random.default_rng(seed)
    rates = [float(miss_rate)] * len(group_sizes) if np.isscalar(miss_rate) else [float(r) for r in miss_rate]  # type: ignore[arg-type, union-attr]
    if len(rates) != len(group_sizes):
        raise ValueError(f"{len(rates)} miss rates for {len(group_sizes)} groups.")
    labels = [f"g{i}" for i, size in enumerate(group_sizes) for _ in range(size)]
    label_rates = [rates[i] for i, size in enumerate(group_sizes) for _ in range(size)]
    flagged: list[list[tuple[float, float]]] = [[] for _ in group_sizes]
    with threshold_rule(rule), warnings.catch_warnings():
        for category in (InfiniteThresholdWarning, SmallGroupWarning, GuaranteeCutWarning, PoolMissWarning):
            warnings.simplefilter("ignore", category)
        for _ in range(draws):
            cal = [_pool(rng, rate, pool_size) for rate in label_rates]
            fitted = RetrievalConformalizer(confidence_level, score="similarity").conformalize_pools(
                cal, fingerprint=_FINGERPRINT, pool_size=pool_size, groups=labels
            )
            for g in range(len(group_sizes)):
                q = float(fitted.calibration_.groups_[f"g{g}"]["threshold"])
                test = [_pool(rng, rates[g], pool_size) for _ in range(n_test)]
                if math.isinf(q):
                    continue
                flagged[g].append(_means([o.covered_and_size("similarity", q) for o in test]))
    return [_summary(size, rate, draws, f) for size, rate, f in zip(group_sizes, rates, flagged, strict=True)]


def simulate_recall_given_flag(
    n: int,
    confidence_level: float,
    miss_rate: float,
    *,
    draws: int,
    seed: int = 0,
    n_gold: int = 3,
    n_test: int = 20,
    pool_size: int = 20,
    rule: str = THRESHOLD_RULE,
    method: str = "crc",
    delta: float | None = None,
) -> FlagTrial:
    """Mean recall (``coverage``) given the flag of recall control (``method`` ``"crc"``, or ``"ltt"`` with
    ``delta``), each gold chunk missed independently."""

    def serve(pool: PoolObservation, q: float) -> tuple[float, int]:
        recall = float(np.sum(pool.gold_scores("similarity") <= q)) / (pool.n_gold or 1)
        return recall, pool.covered_and_size("similarity", q)[1]

    conformalizer = RetrievalConformalizer(
        confidence_level, score="similarity", control="recall", method=method, delta=delta
    )
    return _pooled_draws(n, miss_rate, conformalizer, _Draws(draws, seed, n_test, pool_size, rule, n_gold), serve)


def simulate_answer_set_flag(
    n: int,
    alpha: float,
    miss_rate: float,
    *,
    draws: int,
    seed: int = 0,
    n_test: int = 20,
    rule: str = THRESHOLD_RULE,
) -> FlagTrial:
    """End-to-end coverage given the flag of the Bonferroni answer-set rule (``alpha / 2`` per stage).

    Both stages miss independently at ``miss_rate`` (retrieval: the gold is outside the pool;
    generation: no sample is correct); other nonconformities are uniform. ``mean_size`` is ``nan``.
    """
    rng = np.random.default_rng(seed)

    def stage(size: int) -> np.ndarray:
        return np.where(rng.random(size) < miss_rate, math.inf, rng.random(size))

    flagged = []
    with threshold_rule(rule), warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for _ in range(draws):
            rule_ = bonferroni_thresholds(stage(n), stage(n), alpha)
            if not rule_.guaranteed:
                continue
            covered = (stage(n_test) <= rule_.q_ret) & (stage(n_test) <= rule_.q_gen)
            flagged.append((float(covered.mean()), math.nan))
    return _summary(n, miss_rate, draws, flagged)
