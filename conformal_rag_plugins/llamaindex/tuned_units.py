"""The candidates :func:`~conformal_rag_plugins.llamaindex.hybrid_tuning.calibrate_hybrid_retriever` compares.

Unit (chunks, and the chunks' parents when ``parents=`` is given) x fusion setting x pool
size. The optimisation split is searched once per question (:class:`~.fusion_fanout.FusionFanout`,
the ``QueryFusionRetriever`` pools, scores bit for bit); each unit's context tokens are its MiniLM
token count. Only the chosen candidate's real host is built and queried on the calibration split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode, MetadataMode

from ..datasets.examples import CalibrationExample
from ..labelling.chunk_labels import map_gold_to_chunks
from ..labelling.chunk_records import Chunk
from ..local.llamaindex_stack import build_hybrid_retriever
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.parent_pools import parent_unit_name, to_parent_pool
from ..retrieval.pool_calibration import CandidatePool, check_gold_ids
from ..tuning.candidates import TokenCosts, TunedCandidate, candidate_grid
from ..tuning.tuned_calibration import FusionConfig
from .fingerprint import fingerprint_of
from .fusion_fanout import FusionFanout
from .host import existing_ids, pool_from_nodes
from .parent_retrieval import ParentLevel, chunk_parent_id, resolve_parent_level

__all__ = ["UnitCandidates", "unit_candidates"]


@dataclass
class UnitCandidates:
    """What ``calibrate_tuned`` needs: fetchers, fan-out, fingerprints, per-unit gold, token costs."""

    index: VectorStoreIndex
    nodes: Sequence[BaseNode]
    candidates: list[TunedCandidate]
    base_of: dict[TunedCandidate, TunedCandidate]
    level: ParentLevel | None
    unit_examples: dict[str, list[CalibrationExample]]
    fan: FusionFanout
    token_costs: TokenCosts
    hosts: dict[tuple[FusionConfig, int], QueryFusionRetriever] = field(default_factory=dict)
    parent_of: dict[str, str | None] = field(default_factory=dict)

    def host(self, cand: TunedCandidate) -> QueryFusionRetriever:
        """The real ``QueryFusionRetriever`` of a candidate (built once, only when needed)."""
        key = (cand.fusion, cand.pool_size)
        if key not in self.hosts:
            from llama_index.retrievers.bm25 import BM25Retriever

            bm25 = BM25Retriever.from_defaults(nodes=list(self.nodes), similarity_top_k=cand.pool_size)
            self.hosts[key] = build_hybrid_retriever(
                self.index,
                self.nodes,
                pool_size=cand.pool_size,
                dense_weight=cand.fusion.weight,
                mode=cand.fusion.method,
                bm25=bm25,
            )
        return self.hosts[key]

    def fetcher(self, cand: TunedCandidate) -> Callable[[str], CandidatePool]:
        """``fetch(question)`` through the candidate's real host (parent level through :class:`ParentLevel`)."""
        if cand.unit == "chunk":
            return lambda q: pool_from_nodes(self.host(cand).retrieve(q))[0]
        level = self.level
        assert level is not None
        return lambda q: level.parent_pool(self.host(cand).retrieve(q))

    def fingerprint(self, cand: TunedCandidate) -> Fingerprint:
        """The candidate host's fingerprint (``>parent:max`` appended at parent level)."""
        host = self.host(cand)
        return fingerprint_of(host) if cand.unit == "chunk" else self.level.fingerprint(host)  # type: ignore[union-attr]

    def fanout(self, question: str) -> Mapping[TunedCandidate, CandidatePool]:
        """Every candidate's pool from one dense and one BM25 search."""
        pools = self.fan(question)
        out: dict[TunedCandidate, CandidatePool] = {}
        for cand in self.candidates:
            chunk_pool = pools[(cand.fusion, cand.pool_size)]
            if cand.unit == "chunk":
                out[cand] = chunk_pool
            else:
                level = self.level
                assert level is not None
                parent_of = {str(i): self.parent_of[str(i)] for i in chunk_pool.ids}
                out[cand] = to_parent_pool(chunk_pool, parent_of, level._text, how=level.how).pool
        return out


def unit_candidates(
    index: VectorStoreIndex,
    nodes: Sequence[BaseNode],
    examples: Sequence[CalibrationExample],
    grid: Sequence[FusionConfig],
    pool_sizes: Sequence[int],
    *,
    parents: Any = None,
    parent_aggregation: str = "max",
) -> UnitCandidates:
    """Build the candidates and check the gold ids (chunk ids; with ``parents``, chunk, parent or document ids).

    With ``parents``, chunk-level gold comes from
    :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks` (a parent id becomes
    the chunks holding a reference answer) and parent-level gold from :meth:`ParentLevel.lift_gold`.
    """
    from ..local.tokens import count_tokens

    level = resolve_parent_level(object(), parents, parent_aggregation) if parents is not None else None
    units = ["chunk"] if level is None else ["chunk", parent_unit_name(parent_aggregation)]
    cands, base_of = candidate_grid(list(grid), pool_sizes, units)
    fan = FusionFanout(index, nodes, "hybrid", grid, pool_sizes)
    out = UnitCandidates(index, nodes, cands, base_of, level, {}, fan, TokenCosts(count_tokens))
    examples = list(examples)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    if level is None:
        known = existing_ids(out.host(cands[0]), gold) if gold else None
        if known is not None:
            check_gold_ids(examples, known)
        return out
    out.parent_of = {n.node_id: chunk_parent_id(n) for n in nodes}
    records = [
        Chunk(n.node_id, n.get_content(metadata_mode=MetadataMode.NONE), parent_id=chunk_parent_id(n) or n.node_id)
        for n in nodes
    ]
    out.unit_examples["chunk"] = map_gold_to_chunks(examples, records)[0]
    check_gold_ids(out.unit_examples["chunk"], {n.node_id for n in nodes})
    out.unit_examples[units[1]] = level.lift_gold(examples, out.host(cands[0]))
    return out
