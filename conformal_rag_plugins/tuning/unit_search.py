"""The tuned default written once: a :class:`UnitSearch` per adapter, and :func:`calibrate_unit_search`.

An adapter's ``tuned_units.py`` subclasses :class:`UnitSearch` with what only it knows: how to
build a candidate's real host, query it, fingerprint it, list its ids, fan one search out to every
fusion setting, and read a parent's text. The fan-out to units and the tuned calibration are here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.options import RetrievalOptions
from ..retrieval.parent_pools import to_parent_pool
from ..retrieval.pool_calibration import CandidatePool
from .candidates import CandidateSearch, TokenCosts, TunedCandidate
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
    """

    candidates: list[TunedCandidate]
    base_of: dict[TunedCandidate, TunedCandidate]
    token_costs: TokenCosts
    how: str = "max"
    unit_examples: dict[str, list[CalibrationExample]] = field(default_factory=dict)
    parent_of: dict[str, str | None] = field(default_factory=dict)

    def host(self, cand: TunedCandidate) -> Any:
        """The candidate's real (chunk) host, built once, only when needed."""
        raise NotImplementedError

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
        """Every (fusion setting, pool size)'s chunk pool from one dense and one lexical search."""
        raise NotImplementedError

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
