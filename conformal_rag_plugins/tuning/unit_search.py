"""The tuned default written once: a :class:`UnitSearch` per adapter, and :func:`calibrate_unit_search`.

An adapter's ``tuned_units.py`` subclasses :class:`UnitSearch` with what only it knows: how to
build a candidate's real host, query it, fingerprint it, list its ids, fan one search out to every
fusion setting, and read a parent's text. The host cache, the parent-level gold, the fan-out to
units, the tuned calibration and both adapters' ``calibrate_hybrid_retriever`` (:func:`tune_hybrid`) are here.
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
from .candidates import CandidateSearch, TokenCosts, TunedCandidate, default_pool_sizes
from .fusion_config import FusionConfig
from .options import TuningOptions
from .tuned_calibration import calibrate_tuned


@dataclass
class UnitSearch:
    """The candidates (unit x fusion setting x pool size) of a tuned calibration and how to search them.

    Attributes
    ----------
    candidates : list of TunedCandidate
    base_of : dict
        Larger-pool candidate -> the same setting at the base pool.
    token_costs : TokenCosts
        Context tokens of every unit.
    how : {"max", "sum"}
        How a parent is scored from its chunks (parent units).
    unit_examples : dict of str to list of CalibrationExample
        The questions with the gold of each unit (``"chunk"``, ``"parent:max"``) when they differ.
    parent_of : dict
        Chunk id -> parent id (parent units).
    hosts : dict
        ``(fusion setting, pool size)`` -> the real host, built by :meth:`build_host` when first needed.
    fan : callable, optional
        The adapter's ``FusionFanout``: ``fan(question)`` gives :meth:`chunk_pools`.
    """

    candidates: list[TunedCandidate]
    base_of: dict[TunedCandidate, TunedCandidate]
    token_costs: TokenCosts
    how: str = "max"
    unit_examples: dict[str, list[CalibrationExample]] = field(default_factory=dict)
    parent_of: dict[str, str | None] = field(default_factory=dict)
    hosts: dict[tuple[FusionConfig, int], Any] = field(default_factory=dict)
    fan: Any = None

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
    ) -> None:
        """With parent units: record ``parent_of``, check the chunk-level gold against its chunk ids,
        then the parent-level gold from ``lift()``."""
        self.parent_of = parent_of
        self.unit_examples["chunk"] = chunk_examples
        check_gold_ids(chunk_examples, set(parent_of))
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

    Parameters
    ----------
    found : UnitSearch
        An adapter's candidates (``llamaindex/tuned_units.py``, ``langchain/tuned_units.py``).
    examples : sequence of CalibrationExample
    pool_size : int
        The base pool.
    options : RetrievalOptions, optional
        As in :func:`~.tuned_calibration.calibrate_tuned` (score default ``"auto"``).
    tuning : TuningOptions, optional
        ``optimisation_fraction`` and ``objective``.

    Returns
    -------
    host : Any
        The chosen candidate's (chunk) host.
    calibration : RetrievalCalibration

    Examples
    --------
    >>> host, cal = calibrate_unit_search(found, examples, pool_size=50)  # doctest: +SKIP
    >>> cal.selection_["rule"]  # doctest: +SKIP
    'tuned-hybrid'
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

    The choice (unit, fusion setting, pool size and, with ``score="auto"``, the score family)
    minimises the mean context tokens (MiniLM tokens of the returned units) of the conformal set
    on a seeded optimisation split, searched once per question for every candidate; the chosen
    host alone is then queried on the disjoint calibration split. Whole documents are not a
    candidate here; compare them with ``conformal-rag evaluate --unit auto``.

    Parameters
    ----------
    candidates : callable
        ``candidates(grid, pool_sizes)``: the adapter's :class:`UnitSearch` (a ``partial`` of its ``unit_candidates``).
    examples : sequence of CalibrationExample
        A seeded ``tuning.optimisation_fraction`` of them tunes, the disjoint rest calibrates.
    confidence_level : float or None
        Target probability that a gold chunk is in the returned set (``None``: ``options``', default 0.9).
    pool_size : int
        The base pool.
    options : RetrievalOptions, optional
        ``score`` (default ``"auto"``: the family is tuned too), ``method``/``delta``, ``random_state``
        (the split's seed), ``strict``, ``group_by``/``group_fallback`` and ``progress``.
    tuning : TuningOptions, optional
        The fusion ``grid``, the ``pool_sizes`` to try (default ``(p, 2p, 4p)``),
        ``optimisation_fraction`` (default 0.3) and ``objective``.

    Returns
    -------
    host, calibration : Any, RetrievalCalibration
        The chosen (chunk) host with the chosen pool; the calibration's fingerprint names the fusion
        setting and pool (``>parent:max`` at parent level), ``selection_`` reports the search.

    Examples
    --------
    >>> host, cal = tune_hybrid(partial(unit_candidates, index, nodes, examples), examples, 0.9, 50)  # doctest: +SKIP
    """
    tune = tuning if tuning is not None else TuningOptions()
    found = candidates(tune.grid, default_pool_sizes(pool_size, tune.pool_sizes))
    opts = with_level(options, confidence_level)
    return calibrate_unit_search(found, examples, pool_size=pool_size, options=opts, tuning=tune)
