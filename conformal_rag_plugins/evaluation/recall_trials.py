"""Repeated random-split evaluation of recall control on precomputed candidate pools.

The splits are :func:`~conformal_rag_plugins.evaluation.retrieval_trials.evaluate_splits`'s (same
seed, fixed family); the test half records gold recall, any-gold coverage and set sizes.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.errors import ConformalError
from ..core.pools import PoolObservation
from ..core.quantile import conformal_quantile, ltt_threshold
from ..core.recall_pools import RecallPools, _crc
from ..core.retrieval_scores import SCORE_FAMILIES


@dataclass(frozen=True)
class RecallTrialSummary:
    """Mean recall, coverage (any gold kept) and set size of one rule over the trials."""

    alpha: float
    method: str
    recalls: tuple[float, ...]
    coverages: tuple[float, ...]
    mean_sizes: tuple[float, ...]
    all_sizes: tuple[int, ...]

    def as_row(self) -> dict[str, float | int | str]:
        """The JSON row written by ``conformal-rag evaluate --control recall``."""
        rec = np.asarray(self.recalls)
        return {
            "alpha": self.alpha,
            "method": self.method,
            "target_recall": 1.0 - self.alpha,
            "mean_recall": float(rec.mean()),
            "std_recall": float(rec.std(ddof=1)) if rec.size > 1 else 0.0,
            "mean_coverage": float(np.mean(self.coverages)),
            "mean_set_size": float(np.mean(self.mean_sizes)),
            "median_set_size": float(np.median(self.all_sizes)) if self.all_sizes else 0.0,
            "trials": len(self.recalls),
        }


def evaluate_recall_splits(
    observations: Sequence[PoolObservation],
    alpha: float,
    *,
    family: str = "relative",
    trials: int = 100,
    seed: int = 0,
    calibration_fraction: float = 0.5,
    ltt_delta: float | None = None,
    pools: RecallPools | None = None,
) -> list[RecallTrialSummary]:
    """Recall, coverage and set size of the recall rules and of the single-gold rule over random splits.

    Methods: ``crc`` (risk control of ``1 - recall``), ``ltt`` when ``ltt_delta`` is set, and
    ``single-gold`` (split conformal on the best gold: controls keeping *some* gold, not recall).

    Examples
    --------
    >>> obs = [PoolObservation(np.array([1.0, 0.9, 0.5 - i / 100]), (0, 2)) for i in range(40)]
    >>> rows = {s.method: s for s in evaluate_recall_splits(obs, 0.2, family="rank", trials=5)}
    >>> rows["single-gold"].recalls[0], rows["crc"].recalls[0]
    (0.5, 1.0)
    """
    if family not in SCORE_FAMILIES:
        raise ConformalError(f"Recall evaluation needs a fixed score family {SCORE_FAMILIES}, got {family!r}.")
    obs = list(observations)
    pools = pools or RecallPools.build(obs, family)
    n = len(obs)
    n_cal = round(n * calibration_fraction)
    rng = np.random.default_rng(seed)
    out: dict[str, tuple[list[float], list[float], list[float], list[int]]] = {}
    best = np.asarray([g[0] for g in pools.gold])
    for _ in range(trials):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        rules = {"crc": _crc(pools, cal, alpha)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if ltt_delta is not None:
                rules["ltt"] = ltt_threshold([pools.gold[i] for i in cal], alpha, ltt_delta)
            rules["single-gold"] = conformal_quantile(best[cal], alpha)
        for method, q in rules.items():
            recall, cover, size, sizes = pools.measure(test, q)
            entry = out.setdefault(method, ([], [], [], []))
            entry[0].append(recall)
            entry[1].append(cover)
            entry[2].append(size)
            entry[3].extend(int(s) for s in sizes)
    return [RecallTrialSummary(alpha, m, tuple(r), tuple(c), tuple(s), tuple(a)) for m, (r, c, s, a) in out.items()]
