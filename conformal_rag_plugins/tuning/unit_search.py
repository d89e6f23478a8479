"""The tuned default written once: :class:`UnitSearch` (one subclass per adapter) and :func:`tune_hybrid`.

An adapter's ``tuned_units.py`` supplies only what it knows (build, query and fingerprint a host,
list its ids, fan out one search, read a parent's text); the host cache, parent-level gold, unit
fan-out and tuned calibration live here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.options import RetrievalOptions, with_level
from ..retrieval.parent_pools import parent_unit_name, to_parent_pool
from ..retrieval.pool_calibration import CandidatePool, check_gold_ids
from .candidates import CandidateSearch, TokenCosts, TunedCandidate, candidate_grid, default_pool_sizes
from .fusion_config import FusionConfig
from .options import TuningOptions
from .tuned_calibration import calibrate_tuned


@dataclass
class UnitSearch:
    """The candidates (unit x fusion setting x pool size) of a tuned calibration and how to search them.

    ``base_of`` maps a larger-pool candidate to the same setting at the base pool; ``how`` scores a
    parent from its chunks; ``unit_examples`` holds each unit's gold when they differ; ``hosts`` caches
    ``(fusion, pool size)`` -> host, built by :meth:`build_host` on first use; ``fan`` is the
    adapter's ``FusionFanout`` behind :meth:`chunk_pools`.
    """

    candidates: list[TunedCandidate]
    base_of: dict[TunedCandidate, TunedCandidate]
    token_costs: TokenCosts
    how: str = "max"
    unit_examples: dict[str, list[CalibrationExample]] = field(default_factory=dict)
    parent_of: dict[str, str | None] = field(default_factory=dict)
    hosts: dict[tuple[FusionConfig, int], Any] = field(default_factory=dict)
    fan: Any = None

    @classmethod
    def over(
        cls,
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
        how: str,
        parent_level: bool,
        count_tokens: Callable[[str], int],
        **fields: Any,
    ) -> Any:
        """Every candidate of ``grid`` x ``pool_sizes`` x unit (chunk, and the parent unit when ``parent_level``).

        ``fields``: the subclass's own fields (and ``fan``); ``count_tokens`` prices a context.
        """
        units = ["chunk", parent_unit_name(how)] if parent_level else ["chunk"]
        cands, base_of = candidate_grid(list(grid), pool_sizes, units)
        return cls(cands, base_of, TokenCosts(count_tokens), how, **fields)

    def host(self, cand: TunedCandidate) -> Any:
        """The candidate's real (chunk) host, built once, only when needed."""
        key = (cand.fusion, cand.pool_size)
        if key not in self.hosts:
            self.hosts[key] = self.build_host(cand.fusion, cand.pool_size)
        return self.hosts[key]

    def build_host(self, fusion: FusionConfig, pool_size: int) -> Any:
        """A new real (chunk) host with this fusion setting and pool size."""
        raise NotImplementedError

    def set_parent_gold(
        self,
        parent_of: dict[str, str | None],
        chunk_examples: list[CalibrationExample],
        lift: Callable[[], list[CalibrationExample]],
        *,
        document_key: str | None = None,
    ) -> None:
        """Parent units: record ``parent_of``, check the chunk gold against it, set the parent gold from ``lift()``.

        ``document_key``: how the adapter finds a chunk's document, named in the one gold-id error.
        """
        self.parent_of = parent_of
        self.unit_examples["chunk"] = chunk_examples
        check_gold_ids(chunk_examples, set(parent_of), document_key=document_key, also="parent ids (parents=)")
        self.unit_examples[parent_unit_name(self.how)] = lift()

    def fetcher(self, cand: TunedCandidate) -> Callable[[str], CandidatePool]:
        """``fetch(question)`` through the candidate's real host (parents scored at parent level)."""
        raise NotImplementedError

    def fingerprint(self, cand: TunedCandidate) -> Fingerprint:
        """The candidate host's fingerprint (``>parent:max`` appended at parent level)."""
        raise NotImplementedError

    def all_ids(self, host: Any) -> list[str] | None:
        """Every chunk id ``host`` can return (the calibration's corpus record), or ``None``."""
        raise NotImplementedError

    def chunk_pools(self, question: str) -> Mapping[tuple[FusionConfig, int], CandidatePool]:
        """Every (fusion setting, pool size)'s chunk pool from one dense and one lexical search (``fan``)."""
        assert self.fan is not None
        return self.fan(question)

    def parent_text(self, pid: str) -> str | None:
        """A parent's text from the parents' store, or ``None`` when it does not hold it."""
        raise NotImplementedError

    def fanout(self, question: str) -> Mapping[TunedCandidate, CandidatePool]:
        """Every candidate's pool from one dense and one lexical search."""
        pools = self.chunk_pools(question)
        out: dict[TunedCandidate, CandidatePool] = {}
        for cand in self.candidates:
            chunk_pool = pools[(cand.fusion, cand.pool_size)]
            if cand.unit == "chunk":
                out[cand] = chunk_pool
            else:
                parent_of = {str(i): self.parent_of.get(str(i)) for i in chunk_pool.ids}
                out[cand] = to_parent_pool(chunk_pool, parent_of, self.parent_text, how=self.how).pool
        return out

    def search(self) -> CandidateSearch:
        """What :func:`~.tuned_calibration.calibrate_tuned` needs beyond the fetchers."""
        return CandidateSearch(self.base_of, self.fanout, self.token_costs, self.unit_examples)


def calibrate_unit_search(
    found: UnitSearch,
    examples: Sequence[CalibrationExample],
    *,
    pool_size: int,
    options: RetrievalOptions | None = None,
    tuning: TuningOptions | None = None,
) -> tuple[Any, RetrievalCalibration]:
    """Choose a candidate on an optimisation split, calibrate its host on the rest, record its corpus.

    ``options`` as in :func:`~.tuned_calibration.calibrate_tuned` (score default ``"auto"``); ``tuning``
    gives ``optimisation_fraction`` and ``objective``. Returns the chosen (chunk) host and its calibration.
    """
    fetchers = {c: found.fetcher(c) for c in found.candidates}
    search = found.search()
    tuned = calibrate_tuned(
        examples, fetchers, found.fingerprint, pool_size=pool_size, options=options, tuning=tuning, search=search
    )
    assert tuned.candidate is not None
    host = found.host(tuned.candidate)
    return host, replace(tuned.calibration, corpus_=corpus_record(found.all_ids(host)))


def tune_hybrid(
    candidates: Callable[[Sequence[FusionConfig], tuple[int, ...]], UnitSearch],
    examples: Sequence[CalibrationExample],
    confidence_level: float | None,
    pool_size: int,
    options: RetrievalOptions | None = None,
    tuning: TuningOptions | None = None,
) -> tuple[Any, RetrievalCalibration]:
    """Both adapters' ``calibrate_hybrid_retriever``: choose what the LLM reads, calibrate on the rest.

    The choice (unit, fusion setting, pool size and, with ``score="auto"``, the family) minimises the
    conformal set's mean context tokens (MiniLM) on a seeded optimisation split
    (``tuning.optimisation_fraction``), one search per question for all candidates; only the chosen
    host is queried on the disjoint calibration split. Whole documents are not candidates here
    (compare them with ``conformal-rag evaluate --unit auto``).

    Parameters
    ----------
    candidates : callable
        ``candidates(grid, pool_sizes)`` -> the adapter's :class:`UnitSearch`.
    confidence_level : float or None
        Target probability of a gold chunk in the set (``None``: ``options``', default 0.9).
    pool_size : int
        The base pool.
    options : RetrievalOptions, optional
        ``score`` (default ``"auto"``: tuned too), ``method``/``delta``, ``random_state`` (the split's
        seed), ``strict``, ``group_by``/``group_fallback``, ``progress``.
    tuning : TuningOptions, optional
        ``grid``, ``pool_sizes`` (default ``(p, 2p, 4p)``), ``optimisation_fraction`` (0.3), ``objective``.

    Returns
    -------
    host, calibration : Any, RetrievalCalibration
        The chosen (chunk) host; the fingerprint names fusion setting and pool (``>parent:max`` at
        parent level) and ``selection_`` reports the search.
    """
    tune = tuning if tuning is not None else TuningOptions()
    found = candidates(tune.grid, default_pool_sizes(pool_size, tune.pool_sizes))
    opts = with_level(options, confidence_level)
    return calibrate_unit_search(found, examples, pool_size=pool_size, options=opts, tuning=tune)
