"""The options of a tuned calibration, passed whole: :class:`TuningOptions`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .fusion_config import DEFAULT_FUSION_GRID, FusionConfig


@dataclass(frozen=True)
class TuningOptions:
    """What the tuned calibration searches, and on how many of the questions.

    Attributes
    ----------
    grid : sequence of FusionConfig, default DEFAULT_FUSION_GRID
        Candidate (method, dense weight) pairs.
    pool_sizes : sequence of int, optional
        Pool sizes to try; default ``(pool_size, 2 * pool_size, 4 * pool_size)``. A larger pool
        competes only when the base pool misses more than ``alpha/2`` of the optimisation
        questions; a pool missing more than ``alpha`` is left out when another can reach ``1 - alpha``.
    optimisation_fraction : float, default 0.3
        The seeded share of the questions that chooses; the disjoint rest calibrates.
    objective : {"size", "tokens"}, optional
        What the choice minimises; default ``"tokens"`` when token costs are known, else ``"size"``.

    Examples
    --------
    >>> TuningOptions(pool_sizes=(50, 100)).optimisation_fraction
    0.3
    >>> [c.key for c in TuningOptions().grid][:2]
    ['zscore:0.3', 'zscore:0.5']
    """

    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID
    pool_sizes: Sequence[int] | None = None
    optimisation_fraction: float = 0.3
    objective: str | None = None
