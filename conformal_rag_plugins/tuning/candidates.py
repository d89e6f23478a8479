"""Candidates of the tuned default: unit (chunk, parent) x fusion setting x pool size, and their costs.

:func:`~conformal_rag_plugins.tuning.tuned_calibration.calibrate_tuned` compares
candidates on an optimisation split. A candidate is a :class:`TunedCandidate`; a plain
:class:`~conformal_rag_plugins.tuning.tuned_calibration.FusionConfig` key is the
chunk-level candidate at the base pool. This module also observes every candidate on
the optimisation split, from one fanned-out search per question when the adapter has one,
with the context tokens of every unit (:class:`TokenCosts`).
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
    """One candidate of the tuned default: what is returned, how it is fused, how large the pool is.

    Attributes
    ----------
    unit : str
        ``"chunk"`` or ``"parent:max"`` / ``"parent:sum"``.
    fusion : FusionConfig
    pool_size : int
        The host's (chunk) top-k.

    Examples
    --------
    >>> from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig
    >>> TunedCandidate("chunk", FusionConfig("zscore", 0.5), 50).label(50)
    'zscore:0.5'
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
        Larger-pool key -> the same setting at the base pool: a larger pool competes only
        when its base pool misses more than ``alpha/2`` of the optimisation questions.
    fanout : callable, optional
        ``fanout(question) -> {key: CandidatePool}``: every candidate's pool from one search
        (the optimisation split is then never queried per candidate).
    token_costs : callable, optional
        ``token_costs(pool) -> {id: context tokens}`` (see :class:`TokenCosts`).
    unit_examples : mapping of str to sequence of CalibrationExample, optional
        The same questions (same order) with the gold of another unit, e.g. parent ids
        for ``"parent:max"``; a unit not listed uses the examples given.

    Examples
    --------
    >>> CandidateSearch().fanout is None
    True
    """

    base_of: Mapping[Any, Any] | None = None
    fanout: Callable[[str], Mapping[Any, CandidatePool]] | None = None
    token_costs: Callable[[CandidatePool], Mapping[str, float]] | None = None
    unit_examples: Mapping[str, Sequence[CalibrationExample]] | None = None


def as_candidate(key: Any, pool_size: int) -> TunedCandidate:
    """A :class:`TunedCandidate` as is; a ``FusionConfig`` as the chunk-level candidate at ``pool_size``."""
    return key if isinstance(key, TunedCandidate) else TunedCandidate("chunk", key, int(pool_size))


def default_pool_sizes(pool_size: int, pool_sizes: Sequence[int] | None = None) -> tuple[int, ...]:
    """The pool sizes to try, base first: ``pool_sizes``, or ``(p, 2p, 4p)``.

    Raises
    ------
    CalibrationError
        A size below 1, or ``pool_sizes`` that do not contain ``pool_size``.

    Examples
    --------
    >>> default_pool_sizes(50)
    (50, 100, 200)
    >>> default_pool_sizes(50, [100, 50])
    (50, 100)
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
    """Every (unit, fusion, pool) candidate and ``base_of``: larger pool -> the same setting at the base pool.

    ``pool_sizes[0]`` is the base pool.

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
    """Context tokens of every unit of a pool, counted once per (id, text).

    Parameters
    ----------
    count : callable
        ``count(text) -> tokens`` (the adapters pass MiniLM's
        :func:`~conformal_rag_plugins.local.tokens.count_tokens`).

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

    ``examples_of[key]`` are the questions with that candidate's gold (chunk or parent
    ids), aligned across keys. With ``fanout(question) -> {key: pool}`` each question is
    searched once for every candidate; otherwise each candidate's fetcher is queried.
    ``token_costs(pool) -> {id: tokens}`` adds the context tokens to each observation.
    """
    keys = list(fetchers)
    if fanout is None and token_costs is None:
        return {k: collect_observations(examples_of[k], fetchers[k], progress=progress) for k in keys}
    for k in keys:
        check_labelled(examples_of[k])
    from tqdm.auto import tqdm

    first = examples_of[keys[0]]
    out: dict[Any, list[PoolObservation]] = {k: [] for k in keys}
    for i, ex in enumerate(tqdm(first, desc="tuning", unit="q", disable=not progress)):
        pools = fanout(ex.question) if fanout is not None else None
        for k in keys:
            pool = pools[k] if pools is not None else fetchers[k](examples_of[k][i].question)
            out[k].append(observe(examples_of[k][i], pool, token_costs(pool) if token_costs is not None else None))
    return out
