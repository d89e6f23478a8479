"""One question's candidate pool, the summary of repeated splits, and the score-family choice.

:class:`PoolObservation` is what every calibration and evaluation reads: host scores (best
first) and gold positions. Framework-free; numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import ConformalError
from .quantile import conformal_quantile
from .retrieval_scores import SCORE_FAMILIES, keep_mask, nonconformity


@dataclass(frozen=True)
class PoolObservation:
    """One question's candidate pool: host scores (best first), gold positions and an optional question id.

    ``question_id`` (:func:`~conformal_rag_plugins.datasets.examples.question_digest`) lets
    calibrations check that two stages share questions and an optimisation split avoids them.
    """

    scores: np.ndarray
    gold_positions: tuple[int, ...]
    question_id: str | None = None
    _memo: dict[str, float] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: How many gold chunks the question has in all, in the pool or not (``None``: those in the pool).
    n_gold: int | None = None
    #: What each candidate costs the LLM (context tokens), aligned with ``scores``; ``None`` when unknown.
    costs: np.ndarray | None = None

    def __post_init__(self) -> None:
        keep_mask("relative", self.scores, 0.0)  # validates: no NaN, sorted best first
        if self.costs is not None:
            costs = np.asarray(self.costs, dtype=float)
            if costs.shape != np.shape(self.scores) or (costs.size and (np.isnan(costs).any() or costs.min() < 0)):
                raise ConformalError("Candidate costs must be non-negative numbers, one per candidate score.")
            object.__setattr__(self, "costs", costs)

    def score(self, family: str) -> float:
        """Nonconformity of this question under ``family`` (memoised)."""
        if family not in self._memo:
            self._memo[family] = nonconformity(family, self.scores, self.gold_positions)
        return self._memo[family]

    def gold_scores(self, family: str) -> np.ndarray:
        """Sorted nonconformity of every gold chunk under ``family`` (``+inf`` outside the pool), for recall."""
        from .recall_risk import gold_nonconformity

        return gold_nonconformity(family, self.scores, self.gold_positions, self.n_gold)

    def covered_and_size(self, family: str, threshold: float) -> tuple[bool, int]:
        """Whether a gold chunk is kept, and how many candidates are kept."""
        mask = keep_mask(family, self.scores, threshold, validate=False)
        covered = any(mask[p] for p in self.gold_positions)
        return covered, int(mask.sum())

    def context_tokens(self, family: str, threshold: float) -> float | None:
        """Total cost (context tokens) of the kept candidates; ``None`` without ``costs``.

        Examples
        --------
        >>> obs = PoolObservation(np.array([0.9, 0.8, 0.1]), (0,), costs=np.array([100.0, 50.0, 70.0]))
        >>> obs.context_tokens("rank", 2.0)
        150.0
        """
        if self.costs is None:
            return None
        mask = keep_mask(family, self.scores, threshold, validate=False)
        return float(self.costs[mask].sum())


@dataclass(frozen=True)
class TrialSummary:
    """Mean/std coverage and set size of one method over the trials."""

    alpha: float
    method: str
    coverages: tuple[float, ...]
    mean_sizes: tuple[float, ...]
    all_sizes: tuple[int, ...]
    #: Mean context tokens of the sets in each trial (empty when the candidates carry no costs).
    mean_tokens: tuple[float, ...] = ()

    def as_row(self) -> dict[str, float | int | str | None]:
        """The JSON row written by ``conformal-rag evaluate``.

        ``mean_context_tokens`` is the mean over trials of the mean context tokens per set
        (``None`` when the candidates carry no costs).
        """
        cov = np.asarray(self.coverages)
        return {
            "alpha": self.alpha,
            "method": self.method,
            "mean_coverage": float(cov.mean()),
            "std_coverage": float(cov.std(ddof=1)) if cov.size > 1 else 0.0,
            "mean_set_size": float(np.mean(self.mean_sizes)),
            "median_set_size": float(np.median(self.all_sizes)) if self.all_sizes else 0.0,
            "trials": len(self.coverages),
            "mean_context_tokens": float(np.mean(self.mean_tokens)) if self.mean_tokens else None,
        }


def _mean_size(obs: Sequence[PoolObservation], family: str, threshold: float) -> float:
    return float(np.mean([o.covered_and_size(family, threshold)[1] for o in obs]))


def choose_family(
    optimisation: Sequence[PoolObservation], alpha: float, families: Sequence[str] = SCORE_FAMILIES
) -> str:
    """Pick the family with the smallest mean set on an optimisation split only.

    Ties go to the earlier family. The caller must calibrate on a disjoint split.
    """
    import warnings

    best, best_size = families[0], math.inf
    for fam in families:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = conformal_quantile([o.score(fam) for o in optimisation], alpha)
        size = _mean_size(optimisation, fam, q)
        if size < best_size:
            best, best_size = fam, size
    return best
