"""The candidates :func:`~conformal_rag_plugins.langchain.hybrid_tuning.calibrate_hybrid_retriever` compares.

The LangChain twin of ``llamaindex/tuned_units.py``: unit (chunks, and their parents when
``parents=`` is given) x fusion setting x pool size, searched once per question on the
optimisation split (:class:`~.fusion_fanout.FusionFanout`), each unit costed by its MiniLM
token count. Only the chosen candidate's :class:`~.fusion.ScoredFusionRetriever` (through
:class:`~.parent_retrieval.ParentHost` at parent level) is queried on the calibration split.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..datasets.examples import CalibrationExample, CorpusEntry
from ..labelling.chunk_labels import map_gold_to_chunks
from ..labelling.chunk_records import Chunk
from ..local.bm25 import BM25Index
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.parent_pools import parent_unit_name, to_parent_pool
from ..retrieval.pool_calibration import CandidatePool, check_gold_ids
from ..tuning.candidates import TokenCosts, TunedCandidate, candidate_grid
from ..tuning.tuned_calibration import FusionConfig
from .fusion import ScoredFusionRetriever
from .fusion_fanout import FusionFanout
from .host import existing_ids, fetch_pool
from .parent_retrieval import DEFAULT_ID_KEY, ParentHost, parent_examples, parent_host

__all__ = ["UnitCandidates", "unit_candidates"]


def _parent_id(item: CorpusEntry | Document, ident: str, id_key: str) -> str:
    if isinstance(item, Document):
        return str(item.metadata.get(id_key) or ident)
    return str(getattr(item, "parent_id", None) or ident)


@dataclass
class UnitCandidates:
    """What ``calibrate_tuned`` needs: fetchers, fan-out, fingerprints, per-unit gold, token costs."""

    store: VectorStore
    bm25: BM25Index
    candidates: list[TunedCandidate]
    base_of: dict[TunedCandidate, TunedCandidate]
    fan: FusionFanout
    token_costs: TokenCosts
    parents: Any = None
    id_key: str | None = None
    how: str = "max"
    unit_examples: dict[str, list[CalibrationExample]] = field(default_factory=dict)
    parent_of: dict[str, str] = field(default_factory=dict)
    hosts: dict[tuple[FusionConfig, int], ScoredFusionRetriever] = field(default_factory=dict)
    parent_texts: dict[str, str | None] = field(default_factory=dict)

    def host(self, cand: TunedCandidate) -> ScoredFusionRetriever:
        """The real ``ScoredFusionRetriever`` of a candidate (built once, only when needed)."""
        key = (cand.fusion, cand.pool_size)
        if key not in self.hosts:
            self.hosts[key] = ScoredFusionRetriever(
                vectorstore=self.store,
                bm25=self.bm25,
                k=cand.pool_size,
                weight=cand.fusion.weight,
                method=cand.fusion.method,
            )
        return self.hosts[key]

    def source(self, cand: TunedCandidate) -> ParentHost:
        """The parent-level view of the candidate's host."""
        found = parent_host(self.host(cand), parents=self.parents, id_key=self.id_key, how=self.how)
        assert found is not None
        return found

    def fetcher(self, cand: TunedCandidate) -> Callable[[str], CandidatePool]:
        """``fetch(question)`` through the candidate's real host."""

        def fetch(q: str) -> CandidatePool:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Relevance scores must be between")
                if cand.unit == "chunk":
                    return fetch_pool(self.host(cand), q, cand.pool_size)[0]
                return self.source(cand).fetch_pool(q, cand.pool_size)

        return fetch

    def fingerprint(self, cand: TunedCandidate) -> Fingerprint:
        """The candidate host's fingerprint (``>parent:max`` appended at parent level)."""
        return self.host(cand).conformal_fingerprint() if cand.unit == "chunk" else self.source(cand).fingerprint()

    def _text(self, pid: str) -> str | None:
        if pid not in self.parent_texts:
            value = self.source(self.candidates[0]).lookup([pid])[pid]
            self.parent_texts[pid] = None if value is None else getattr(value, "page_content", str(value))
        return self.parent_texts[pid]

    def fanout(self, question: str) -> Mapping[TunedCandidate, CandidatePool]:
        """Every candidate's pool from one dense and one BM25 search."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Relevance scores must be between")
            pools = self.fan(question)
        out: dict[TunedCandidate, CandidatePool] = {}
        for cand in self.candidates:
            chunk_pool = pools[(cand.fusion, cand.pool_size)]
            if cand.unit == "chunk":
                out[cand] = chunk_pool
            else:
                parent_of = {str(i): self.parent_of.get(str(i)) for i in chunk_pool.ids}
                out[cand] = to_parent_pool(chunk_pool, parent_of, self._text, how=self.how).pool
        return out


def unit_candidates(
    store: VectorStore,
    corpus: Sequence[CorpusEntry | Document],
    ids: Sequence[str],
    texts: Sequence[str],
    examples: Sequence[CalibrationExample],
    grid: Sequence[FusionConfig],
    pool_sizes: Sequence[int],
    *,
    parents: Any = None,
    id_key: str | None = None,
    parent_aggregation: str = "max",
) -> UnitCandidates:
    """Build the candidates and check the gold ids (chunk ids; with ``parents``, chunk or parent ids).

    With ``parents``, chunk-level gold comes from
    :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks` (a parent id becomes
    the chunks holding a reference answer) and parent-level gold from
    :func:`~.parent_retrieval.parent_examples`.
    """
    from ..local.tokens import count_tokens

    bm25 = BM25Index(list(ids), list(texts))
    probe = ScoredFusionRetriever(vectorstore=store, bm25=bm25, k=int(pool_sizes[0]))
    level = parent_host(probe, parents=parents, id_key=id_key, how=parent_aggregation)
    units = ["chunk"] if level is None else ["chunk", parent_unit_name(parent_aggregation)]
    cands, base_of = candidate_grid(list(grid), pool_sizes, units)
    fan = FusionFanout(store, bm25, "hybrid", grid, pool_sizes)
    out = UnitCandidates(store, bm25, cands, base_of, fan, TokenCosts(count_tokens), parents, id_key)
    out.how = parent_aggregation
    examples = list(examples)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    if level is None:
        known = existing_ids(store, gold) if gold else None
        if known is not None:
            check_gold_ids(examples, known)
        return out
    key = level.id_key or DEFAULT_ID_KEY
    out.parent_of = {i: _parent_id(item, i, key) for item, i in zip(corpus, ids, strict=True)}
    records = [Chunk(i, t, parent_id=out.parent_of[i]) for i, t in zip(ids, texts, strict=True)]
    out.unit_examples["chunk"] = map_gold_to_chunks(examples, records)[0]
    check_gold_ids(out.unit_examples["chunk"], set(ids))
    out.unit_examples[units[1]] = parent_examples(level, examples)
    return out
