"""Candidates of the tuned default (unit x fusion setting x pool size), their token costs, and observing them.

A plain ``FusionConfig`` key stands for the chunk-level candidate at the base pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import CalibrationError
from ..core.pools import PoolObservation
from ..datasets.examples import CalibrationExample
from ..retrieval.pool_calibration import CandidatePool, check_labelled, collect_observations, observe


@dataclass(frozen=True)
class TunedCandidate:
    """One candidate of the tuned default: unit (``"chunk"``, ``"parent:max"``/``"parent:sum"``), fusion, chunk pool.

    Examples
    --------
    >>> from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig
    >>> TunedCandidate("parent:max", FusionConfig("minmax", 0.3), 100).label(50)
    'parent:max/minmax:0.3@100'
    """

    unit: str
    fusion: Any
    pool_size: int

    def label(self, base_pool: int) -> str:
        """``[unit/]fusion[@pool]`` (chunk level and the base pool left out), as ``evaluate`` reports it."""
        name = self.fusion.key if self.unit == "chunk" else f"{self.unit}/{self.fusion.key}"
        return name if self.pool_size == base_pool else f"{name}@{self.pool_size}"


@dataclass(frozen=True)
class CandidateSearch:
    """How the tuned calibration searches its candidates, beyond one fetcher each.

    Attributes
    ----------
    base_of : mapping, optional
        Larger-pool key -> the same setting at the base pool: a larger pool competes only when its
        base pool misses more than ``alpha/2`` of the optimisation questions.
    fanout : callable, optional
        ``fanout(question) -> {key: CandidatePool}`` from one search (no per-candidate queries).
    token_costs : callable, optional
        ``token_costs(pool) -> {id: context tokens}`` (:class:`TokenCosts`).
    unit_examples : mapping, optional
        The same questions, same order, with another unit's gold (e.g. parent ids); unlisted units
        use the examples given.
    """

    base_of: Mapping[Any, Any] | None = None
    fanout: Callable[[str], Mapping[Any, CandidatePool]] | None = None
    token_costs: Callable[[CandidatePool], Mapping[str, float]] | None = None
    unit_examples: Mapping[str, Sequence[CalibrationExample]] | None = None


def as_candidate(key: Any, pool_size: int) -> TunedCandidate:
    """A :class:`TunedCandidate` as is; a ``FusionConfig`` as the chunk-level candidate at ``pool_size``."""
    return key if isinstance(key, TunedCandidate) else TunedCandidate("chunk", key, int(pool_size))


def default_pool_sizes(pool_size: int, pool_sizes: Sequence[int] | None = None) -> tuple[int, ...]:
    """The pool sizes to try, base first: ``pool_sizes`` (containing ``pool_size``), or ``(p, 2p, 4p)``; all >= 1.

    Examples
    --------
    >>> default_pool_sizes(50), default_pool_sizes(50, [100, 50])
    ((50, 100, 200), (50, 100))
    """
    sizes = (pool_size, 2 * pool_size, 4 * pool_size) if pool_sizes is None else tuple(pool_sizes)
    if any(not isinstance(p, int) or isinstance(p, bool) or p < 1 for p in (pool_size, *sizes)):
        raise CalibrationError(f"Pool sizes must be integers >= 1, got {pool_size} and {sizes}.")
    if pool_size not in sizes:
        raise CalibrationError(f"pool_sizes {sizes} must contain the base pool_size={pool_size}.")
    return (pool_size, *sorted(set(sizes) - {pool_size}))


def candidate_grid(
    grid: Sequence[Any], pool_sizes: Sequence[int], units: Sequence[str] = ("chunk",)
) -> tuple[list[TunedCandidate], dict[TunedCandidate, TunedCandidate]]:
    """Every (unit, fusion, pool) candidate, and ``base_of``: larger pool -> same setting at ``pool_sizes[0]``.

    Examples
    --------
    >>> from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig
    >>> cands, base_of = candidate_grid([FusionConfig("zscore", 0.5)], (50, 100))
    >>> [c.label(50) for c in cands], [(k.label(50), v.label(50)) for k, v in base_of.items()]
    (['zscore:0.5', 'zscore:0.5@100'], [('zscore:0.5@100', 'zscore:0.5')])
    """
    base = pool_sizes[0]
    cands = [TunedCandidate(u, c, int(p)) for u in units for c in grid for p in pool_sizes]
    base_of = {c: TunedCandidate(c.unit, c.fusion, base) for c in cands if c.pool_size != base}
    return cands, base_of


class TokenCosts:
    """Context tokens of every unit of a pool, ``count(text)`` called once per (id, text).

    Examples
    --------
    >>> import numpy as np
    >>> costs = TokenCosts(lambda t: len(t.split()))
    >>> costs(CandidatePool(("a", "b"), ("one two", "three"), np.array([0.9, 0.1])))
    {'a': 2.0, 'b': 1.0}
    """

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self._cache: dict[tuple[str, str], float] = {}

    def __call__(self, pool: CandidatePool) -> dict[str, float]:
        out = {}
        for ident, text in zip(pool.ids, pool.texts, strict=True):
            key = (str(ident), text)
            if key not in self._cache:
                self._cache[key] = float(self.count(text))
            out[str(ident)] = self._cache[key]
        return out


def observe_candidates(
    examples_of: Mapping[Any, Sequence[CalibrationExample]],
    fetchers: Mapping[Any, Callable[[str], CandidatePool]],
    *,
    fanout: Callable[[str], Mapping[Any, CandidatePool]] | None = None,
    token_costs: Callable[[CandidatePool], Mapping[str, float]] | None = None,
    progress: bool = True,
) -> dict[Any, list[PoolObservation]]:
    """One aligned list of observations per candidate key.

    ``examples_of[key]`` carry that candidate's gold, aligned across keys. With ``fanout`` each
    question is searched once for all candidates, else per fetcher; ``token_costs`` adds context tokens.
    """
    keys = list(fetchers)
    if fanout is None and token_costs is None:
        return {k: collect_observations(examples_of[k], fetchers[k], progress=progress) for k in keys}
    for k in keys:
        check_labelled(examples_of[k])
    from ..runtime.progress import progress_bar

    first = examples_of[keys[0]]
    out: dict[Any, list[PoolObservation]] = {k: [] for k in keys}
    for i, ex in enumerate(progress_bar(first, desc="tuning", unit="q", enabled=progress)):
        pools = fanout(ex.question) if fanout is not None else None
        for k in keys:
            pool = pools[k] if pools is not None else fetchers[k](examples_of[k][i].question)
            out[k].append(observe(examples_of[k][i], pool, token_costs(pool) if token_costs is not None else None))
    return out
