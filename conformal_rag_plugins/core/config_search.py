"""Choose a host configuration (e.g. fusion weight) and a score family together, on an optimisation split.

The objective is the mean set size or (``objective="tokens"``) mean context tokens. The caller
must compute the final threshold on a disjoint calibration split, which keeps split-conformal
validity. :func:`evaluate_tuned_splits` repeats the whole protocol over random splits.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .binomial import binom_sf_grid
from .errors import ConformalError
from .pool_matrix import PoolMatrix
from .pools import PoolObservation, TrialSummary
from .quantile import conformal_quantile, flagged_rank
from .retrieval_scores import SCORE_FAMILIES
from .splits import DEFAULT_SPLITS, RandomSplits

#: What tuning minimises on the optimisation split.
OBJECTIVES = ("size", "tokens")


@dataclass(frozen=True)
class TuningChoice:
    """The chosen (configuration, family) and the mean set size (``"config|family"`` keys) of every candidate.

    ``skipped``: larger pools whose base pool missed at most ``alpha/2``. ``infeasible``: pools
    missing more than ``alpha`` (they cannot reach ``1 - alpha``, and a ``+inf`` threshold would keep
    their whole small pool), left out only when another configuration is feasible.
    """

    config: str
    family: str
    mean_sizes: dict[str, float]
    n_optimisation: int
    mean_tokens: dict[str, float] = field(default_factory=dict)
    objective: str = "size"
    skipped: tuple[str, ...] = ()
    infeasible: tuple[str, ...] = ()


def _check_aligned(observations: Mapping[str, Sequence[PoolObservation]]) -> int:
    if not observations:
        raise ConformalError("No configurations to choose from; pass at least one.")
    lengths = {key: len(obs) for key, obs in observations.items()}
    if len(set(lengths.values())) != 1:
        raise ConformalError(f"Every configuration needs one observation per question, got {lengths}.")
    n = next(iter(lengths.values()))
    if n == 0:
        raise ConformalError("The optimisation split is empty; use more calibration questions.")
    return n


def _check_options(
    families: Sequence[str], objective: str, base_of: Mapping[str, str] | None, keys: Sequence[str]
) -> None:
    for fam in families:
        if fam not in SCORE_FAMILIES:
            raise ConformalError(f"Unknown score family {fam!r}; use one of {SCORE_FAMILIES}.")
    if objective not in OBJECTIVES:
        raise ConformalError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    for key, base in (base_of or {}).items():
        if key not in keys or base not in keys:
            raise ConformalError(f"base_of maps {key!r} to {base!r}, but both must be configurations.")


def _quantile(values: np.ndarray, alpha: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return conformal_quantile(values, alpha)


#: Threshold values less likely than this under the calibration's law are left out of the expectation.
_NEGLIGIBLE = 1e-9


def _threshold_law(gold: np.ndarray, alpha: float, n_calibration: int) -> tuple[np.ndarray, np.ndarray]:
    """Values and probabilities of the threshold a calibration of ``n_calibration`` draws from ``gold`` serves.

    The served threshold is the ``k``-th smallest of ``n_calibration`` scores (:func:`flagged_rank`: the
    plain rank without a miss, its rank with some, ``+inf`` past its miss cap). Drawn from the
    empirical law of ``gold``, ``P(threshold <= v) = P(Binomial(n_calibration, F(v)) >= k)``.
    """
    values, counts = np.unique(gold, return_counts=True)  # +inf (misses) last
    share = np.cumsum(counts) / gold.size
    rank = flagged_rank(n_calibration, alpha)
    miss = float(np.isposinf(gold).mean())
    if rank is None:
        return np.array([np.inf]), np.array([1.0])
    # how many calibration misses: none (plain rank), 1..max_misses (the flagged rank), more (+inf)
    p_none = (1.0 - miss) ** n_calibration
    p_over = float(binom_sf_grid(rank.max_misses + 1, n_calibration, [miss])[0])
    law = np.zeros(values.size)
    for k, weight in ((rank.rank_for(0), p_none), (rank.rank, 1.0 - p_none - p_over)):
        if k is not None and weight > 0.0:
            cdf = binom_sf_grid(k, n_calibration, share)
            law += weight * np.diff(cdf, prepend=0.0)
    values, law = np.append(values, np.inf), np.append(law, p_over + max(0.0, 1.0 - p_over - law.sum()))
    keep = law > _NEGLIGIBLE
    return values[keep], law[keep]


def _expected(
    matrix: PoolMatrix, family: str, rows: np.ndarray | None, alpha: float, n_calibration: int
) -> tuple[float, float | None]:
    """Mean set size and context tokens on ``rows``, averaged over the threshold's law (:func:`_threshold_law`)."""
    gold = matrix.gold[family] if rows is None else matrix.gold[family][rows]
    size, tokens = 0.0, None if matrix.costs is None else 0.0  # plain floats, as reported
    for value, weight in zip(*_threshold_law(gold, alpha, n_calibration), strict=True):
        _, kept, cost = matrix.evaluate(family, float(value), rows)
        size += float(weight) * float(kept.mean())
        if tokens is not None and cost is not None:
            tokens += float(weight) * float(cost.mean())
    return size, tokens


def _choose(
    matrices: Mapping[str, PoolMatrix],
    rows: np.ndarray | None,
    alpha: float,
    families: Sequence[str],
    objective: str,
    base_of: Mapping[str, str] | None,
    n_calibration: int | None = None,
) -> TuningChoice:
    if objective == "tokens" and any(m.costs is None for m in matrices.values()):
        raise ConformalError("objective='tokens' needs the context tokens (costs) of every candidate.")
    shares = {k: m.miss_share(rows) for k, m in matrices.items()}
    infeasible = tuple(k for k, share in shares.items() if share > alpha)
    if len(infeasible) == len(shares):
        infeasible = ()  # nothing reaches 1 - alpha: compare them all (the calibration warns about misses)
    skipped = tuple(k for k, base in (base_of or {}).items() if shares[base] <= alpha / 2 and k not in infeasible)
    n = len(next(iter(matrices.values()))) if rows is None else int(np.size(rows))
    n_cal = n if n_calibration is None else int(n_calibration)
    sizes: dict[str, float] = {}
    tokens: dict[str, float] = {}
    best: tuple[str, str] | None = None
    best_value = math.inf
    for key, matrix in matrices.items():
        if key in skipped or key in infeasible:
            continue
        for fam in families:
            size, cost = _expected(matrix, fam, rows, alpha, n_cal)
            sizes[f"{key}|{fam}"] = size
            if cost is not None:
                tokens[f"{key}|{fam}"] = cost
            value = tokens[f"{key}|{fam}"] if objective == "tokens" else sizes[f"{key}|{fam}"]
            if value < best_value - 1e-12:
                best, best_value = (key, fam), value
    assert best is not None
    return TuningChoice(best[0], best[1], sizes, n, tokens, objective, skipped, infeasible)


def choose_configuration(
    observations: Mapping[str, Sequence[PoolObservation]],
    alpha: float,
    *,
    families: Sequence[str] = SCORE_FAMILIES,
    objective: str = "size",
    base_of: Mapping[str, str] | None = None,
    n_calibration: int | None = None,
) -> TuningChoice:
    """Pick the configuration and family with the smallest mean set (or context) on the optimisation split.

    A candidate's value is its mean set size (or context tokens) on the optimisation observations
    (aligned lists per configuration), averaged over the law of the threshold a calibration of
    ``n_calibration`` questions (default: as many as the optimisation split) drawn like them would
    serve: a family whose threshold sits on a knife's edge (a rank between 1 and 2) pays for it, and the
    choice is judged at the calibration's size, not the optimisation split's. Ties go to the earlier
    configuration, then family.
    ``base_of`` maps a larger-pool configuration to its base pool: it is tried only when the base
    misses more than ``alpha/2`` (near ``alpha`` the threshold explodes; below, it costs latency for nothing).

    Examples
    --------
    >>> good = [PoolObservation(np.array([0.9, 0.2]), (0,))] * 20
    >>> bad = [PoolObservation(np.array([0.9, 0.8]), (1,))] * 20
    >>> choice = choose_configuration({"w=0.3": bad, "w=0.7": good}, 0.1, families=("rank",))
    >>> choice.config, choice.mean_sizes
    ('w=0.7', {'w=0.3|rank': 2.0, 'w=0.7|rank': 1.0})
    """
    _check_aligned(observations)
    _check_options(families, objective, base_of, list(observations))
    matrices = {k: PoolMatrix.from_observations(obs, families) for k, obs in observations.items()}
    return _choose(matrices, None, alpha, families, objective, base_of, n_calibration)


def _split_sizes(n: int, calibration_fraction: float, optimisation_fraction: float) -> tuple[int, int]:
    n_cal = round(n * calibration_fraction)
    n_opt = round(n_cal * optimisation_fraction)
    if n_opt < 1 or n_cal - n_opt < 1 or n - n_cal < 1:
        raise ConformalError(f"{n} questions are too few to split into optimisation, calibration and test parts.")
    return n_cal, n_opt


def evaluate_tuned_splits(
    observations: Mapping[str, Sequence[PoolObservation]],
    alpha: float,
    *,
    families: Sequence[str] = SCORE_FAMILIES,
    splits: RandomSplits = DEFAULT_SPLITS,
    objective: str = "size",
    base_of: Mapping[str, str] | None = None,
) -> tuple[TrialSummary, Counter[str]]:
    """Coverage and set size of the tuned protocol over random splits.

    Per trial: the first ``optimisation_fraction`` of the calibration half chooses
    (:func:`choose_configuration`), the rest calibrates, the test half measures. Returns the
    ``"tuned"`` summary and a Counter of the ``"config|family"`` choices.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> obs = [PoolObservation(np.sort(rng.random(5))[::-1].copy(), (int(rng.integers(5)),)) for _ in range(60)]
    >>> summary, choices = evaluate_tuned_splits({"a": obs}, 0.2, families=("rank",), splits=RandomSplits(trials=5))
    >>> summary.method, sum(choices.values())
    ('tuned', 5)
    """
    n = _check_aligned(observations)
    _check_options(families, objective, base_of, list(observations))
    rng = np.random.default_rng(splits.seed)
    n_cal, n_opt = _split_sizes(n, splits.calibration_fraction, splits.optimisation_fraction)
    matrices = {k: PoolMatrix.from_observations(obs, families) for k, obs in observations.items()}
    choices: Counter[str] = Counter()
    coverages, mean_sizes, all_sizes, mean_tokens = [], [], [], []
    for _ in range(splits.trials):
        perm = rng.permutation(n)
        opt_idx, cal_idx, test_idx = perm[:n_opt], perm[n_opt:n_cal], perm[n_cal:]
        choice = _choose(matrices, opt_idx, alpha, families, objective, base_of, n_cal - n_opt)
        chosen = matrices[choice.config]
        choices[f"{choice.config}|{choice.family}"] += 1
        q = _quantile(chosen.gold[choice.family][cal_idx], alpha)
        covered, kept, cost = chosen.evaluate(choice.family, q, test_idx)
        coverages.append(float(covered.mean()))
        mean_sizes.append(float(kept.mean()))
        all_sizes.extend(int(k) for k in kept)
        if cost is not None:
            mean_tokens.append(float(cost.mean()))
    summary = TrialSummary(alpha, "tuned", tuple(coverages), tuple(mean_sizes), tuple(all_sizes), tuple(mean_tokens))
    return summary, choices


def larger_pools_eligible(
    observations: Mapping[str, Sequence[PoolObservation]],
    alpha: float,
    *,
    splits: RandomSplits = DEFAULT_SPLITS,
) -> bool:
    """Whether, in any trial of :func:`evaluate_tuned_splits` (same ``splits``), a base-pool setting misses > alpha/2.

    If not, larger pools need not be retrieved at all: the tuned result is the same.

    Examples
    --------
    >>> hit, miss = PoolObservation(np.array([0.9]), (0,)), PoolObservation(np.array([0.9]), ())
    >>> larger_pools_eligible({"p50": [hit] * 40}, 0.1, splits=RandomSplits(trials=5))
    False
    >>> larger_pools_eligible({"p50": [miss] * 10 + [hit] * 30}, 0.1, splits=RandomSplits(trials=5))
    True
    """
    n = _check_aligned(observations)
    _, n_opt = _split_sizes(n, splits.calibration_fraction, splits.optimisation_fraction)
    misses = np.array([[not o.gold_positions for o in obs] for obs in observations.values()], dtype=bool)
    rng = np.random.default_rng(splits.seed)
    for _ in range(splits.trials):
        opt_idx = rng.permutation(n)[:n_opt]
        if (misses[:, opt_idx].mean(axis=1) > alpha / 2).any():
            return True
    return False


def evaluate_fixed_settings(
    observations: Mapping[str, Sequence[PoolObservation]],
    alpha: float,
    *,
    families: Sequence[str] = SCORE_FAMILIES,
    splits: RandomSplits = DEFAULT_SPLITS,
) -> dict[str, TrialSummary]:
    """Every fixed ``"config|family"`` over the same random splits (the whole calibration half calibrates).

    The best in hindsight is the yardstick for the tuned protocol.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> obs = [PoolObservation(np.sort(rng.random(5))[::-1].copy(), (int(rng.integers(5)),)) for _ in range(60)]
    >>> out = evaluate_fixed_settings({"a": obs}, 0.2, families=("rank",), splits=RandomSplits(trials=5))
    >>> list(out), out["a|rank"].method
    (['a|rank'], 'a|rank')
    """
    n = _check_aligned(observations)
    _check_options(families, "size", None, list(observations))
    rng = np.random.default_rng(splits.seed)
    n_cal = round(n * splits.calibration_fraction)
    if n_cal < 1 or n - n_cal < 1:
        raise ConformalError(f"{n} questions are too few to split into calibration and test halves.")
    matrices = {k: PoolMatrix.from_observations(obs, families) for k, obs in observations.items()}
    stats: dict[str, tuple[list[float], list[float], list[int], list[float]]] = {
        f"{k}|{f}": ([], [], [], []) for k in matrices for f in families
    }
    for _ in range(splits.trials):
        perm = rng.permutation(n)
        cal_idx, test_idx = perm[:n_cal], perm[n_cal:]
        for key, matrix in matrices.items():
            for fam in families:
                covered, kept, cost = matrix.evaluate(fam, _quantile(matrix.gold[fam][cal_idx], alpha), test_idx)
                entry = stats[f"{key}|{fam}"]
                entry[0].append(float(covered.mean()))
                entry[1].append(float(kept.mean()))
                entry[2].extend(int(k) for k in kept)
                if cost is not None:
                    entry[3].append(float(cost.mean()))
    return {
        key: TrialSummary(alpha, key, tuple(c), tuple(s), tuple(a), tuple(t)) for key, (c, s, a, t) in stats.items()
    }
