"""The per-question arrays of recall control, and the score-family choice for it (numpy only)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .pools import PoolObservation
from .quantile import crc_threshold
from .retrieval_scores import SCORE_FAMILIES, candidate_nonconformity


@dataclass(frozen=True)
class RecallPools:
    """Per question under one family: sorted gold nonconformities and ascending candidate nonconformities."""

    gold: list[np.ndarray]
    candidates: list[np.ndarray]

    @classmethod
    def build(cls, observations: Sequence[PoolObservation], family: str) -> RecallPools:
        """Compute the arrays once for ``family``.

        Examples
        --------
        >>> obs = [PoolObservation(np.array([0.9, 0.5]), (0, 1))]
        >>> RecallPools.build(obs, "rank").gold[0].tolist()
        [1.0, 2.0]
        """
        return cls(
            [o.gold_scores(family) for o in observations],
            [candidate_nonconformity(family, o.scores, validate=False) for o in observations],
        )

    def measure(self, idx: np.ndarray, q: float) -> tuple[float, float, float, np.ndarray]:
        """Mean recall, share with a gold chunk kept, mean size, and the sizes, at threshold ``q``."""
        recalls, covered, sizes = [], [], []
        for i in idx:
            g = self.gold[i]
            kept = np.count_nonzero(np.isfinite(g) & (g <= q))
            recalls.append(kept / g.size)
            covered.append(kept > 0)
            sizes.append(int(np.searchsorted(self.candidates[i], q, side="right")))
        arr = np.asarray(sizes)
        return float(np.mean(recalls)), float(np.mean(covered)), float(arr.mean()), arr


def _crc(pools: RecallPools, idx: np.ndarray, alpha: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crc_threshold([pools.gold[i] for i in idx], alpha)


def choose_recall_family(
    optimisation: Sequence[PoolObservation], alpha: float, families: Sequence[str] = SCORE_FAMILIES
) -> str:
    """The family whose conformal-risk-control threshold gives the smallest mean set on ``optimisation``.

    Ties go to the earlier family. The caller must calibrate on a disjoint split.

    Examples
    --------
    >>> obs = [PoolObservation(np.array([1.0, 0.5 - i / 100]), (1,)) for i in range(20)]
    >>> choose_recall_family(obs, 0.2)
    'similarity'
    """
    best, best_size = families[0], math.inf
    idx = np.arange(len(optimisation))
    for fam in families:
        pools = RecallPools.build(optimisation, fam)
        size = pools.measure(idx, _crc(pools, idx, alpha))[2]
        if size < best_size:
            best, best_size = fam, size
    return best
