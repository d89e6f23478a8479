"""One candidate setting's pool observations as padded arrays, for fast repeated thresholding.

Tuning thresholds dozens of settings over a hundred splits; :class:`PoolMatrix` makes each a few
numpy operations, with exactly the rule of :func:`~.retrieval_scores.keep_mask` (kept iff
``<= threshold``, ties kept; covered iff a gold candidate is kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .pools import PoolObservation
from .retrieval_scores import SCORE_FAMILIES, candidate_nonconformity


@dataclass(frozen=True)
class PoolMatrix:
    """Padded arrays of one setting's observations (one row per question, same order).

    Candidates are padded with ``+inf`` nonconformity and 0 cost past each pool's end.

    Examples
    --------
    >>> obs = [PoolObservation(np.array([0.9, 0.5]), (1,), costs=np.array([10.0, 20.0])),
    ...        PoolObservation(np.array([0.8]), (), costs=np.array([5.0]))]
    >>> m = PoolMatrix.from_observations(obs)
    >>> covered, sizes, tokens = m.evaluate("relative", 0.4)
    >>> covered.tolist(), sizes.tolist(), tokens.tolist()
    ([True, False], [2, 1], [30.0, 5.0])
    >>> m.miss_share()
    0.5
    """

    gold: dict[str, np.ndarray]
    candidates: dict[str, np.ndarray]
    costs: np.ndarray | None
    sizes: np.ndarray
    misses: np.ndarray

    @classmethod
    def from_observations(
        cls, observations: Sequence[PoolObservation], families: Sequence[str] = SCORE_FAMILIES
    ) -> PoolMatrix:
        """Build the arrays (costs only when every observation has them)."""
        obs = list(observations)
        n = len(obs)
        width = max((o.scores.size for o in obs), default=0)
        with_costs = n > 0 and all(o.costs is not None for o in obs)
        gold = {f: np.array([o.score(f) for o in obs], dtype=float) for f in families}
        cands = {f: np.full((n, width), np.inf) for f in families}
        costs = np.zeros((n, width)) if with_costs else None
        for i, o in enumerate(obs):
            k = o.scores.size
            for f in families:
                cands[f][i, :k] = candidate_nonconformity(f, o.scores, validate=False)
            if costs is not None:
                costs[i, :k] = o.costs  # type: ignore[assignment]
        sizes = np.array([o.scores.size for o in obs], dtype=int)
        misses = np.array([not o.gold_positions for o in obs], dtype=bool)
        return cls(gold, cands, costs, sizes, misses)

    def __len__(self) -> int:
        return int(self.sizes.size)

    def evaluate(
        self, family: str, threshold: float, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Coverage flags, set sizes and context tokens (``None`` without costs) of ``rows`` at ``threshold``."""
        cand = self.candidates[family] if rows is None else self.candidates[family][rows]
        gold = self.gold[family] if rows is None else self.gold[family][rows]
        misses = self.misses if rows is None else self.misses[rows]
        if np.isposinf(threshold):
            sizes = self.sizes if rows is None else self.sizes[rows]
            kept = np.arange(cand.shape[1]) < sizes[:, None]
        else:
            kept = cand <= threshold
        covered = (gold <= threshold) & ~misses
        tokens = None
        if self.costs is not None:
            costs = self.costs if rows is None else self.costs[rows]
            tokens = (costs * kept).sum(axis=1)
        return covered, kept.sum(axis=1), tokens

    def miss_share(self, rows: np.ndarray | None = None) -> float:
        """Share of questions (of ``rows``) with no gold candidate in the pool."""
        misses = self.misses if rows is None else self.misses[rows]
        return float(misses.mean()) if misses.size else 0.0
