"""The candidates of :func:`~.hybrid_tuning.calibrate_hybrid_retriever`: unit x fusion setting x pool size."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode, MetadataMode

from ..datasets.examples import CalibrationExample
from ..labelling.chunk_labels import map_gold_to_chunks
from ..labelling.chunk_records import Chunk
from ..labelling.gold_ids import gold_on_chunks
from ..local.llamaindex_stack import build_hybrid_retriever
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.host import Parents, as_parents
from ..retrieval.pool_calibration import CandidatePool
from ..tuning.candidates import TunedCandidate
from ..tuning.fusion_config import FusionConfig
from ..tuning.unit_search import UnitSearch
from .fingerprint import fingerprint_of
from .fusion_fanout import FusionFanout
from .host import DOCUMENT_KEY, all_ids, gold_lookup, pool_from_nodes
from .parent_retrieval import ParentLevel, chunk_parent_id, resolve_parent_level


@dataclass
class UnitCandidates(UnitSearch):
    """The :class:`~conformal_rag_plugins.tuning.unit_search.UnitSearch` over ``QueryFusionRetriever`` hosts."""

    index: VectorStoreIndex | None = None
    nodes: Sequence[BaseNode] = ()
    level: ParentLevel | None = None

    def build_host(self, fusion: FusionConfig, pool_size: int) -> QueryFusionRetriever:
        return build_hybrid_retriever(
            self.index, self.nodes, pool_size=pool_size, dense_weight=fusion.weight, mode=fusion.method
        )

    def fetcher(self, cand: TunedCandidate) -> Callable[[str], CandidatePool]:
        if cand.unit == "chunk":
            return lambda q: pool_from_nodes(self.host(cand).retrieve(q))[0]
        level = self.level
        assert level is not None
        return lambda q: level.parent_pool(self.host(cand).retrieve(q))

    def fingerprint(self, cand: TunedCandidate) -> Fingerprint:
        host = self.host(cand)
        return fingerprint_of(host) if cand.unit == "chunk" else self.level.fingerprint(host)  # type: ignore[union-attr]

    def all_ids(self, host: Any) -> list[str] | None:
        return all_ids(host)

    def parent_text(self, pid: str) -> str | None:
        assert self.level is not None
        return self.level._text(pid)


def unit_candidates(
    index: VectorStoreIndex,
    nodes: Sequence[BaseNode],
    examples: Sequence[CalibrationExample],
    grid: Sequence[FusionConfig],
    pool_sizes: Sequence[int],
    *,
    parents: Any = None,
) -> UnitCandidates:
    """Build the candidates and put the gold on each unit (chunk or document ids; with ``parents``, parent ids too).

    Chunk-level gold follows the one rule of :func:`~conformal_rag_plugins.labelling.gold_ids.gold_on_chunks`.

    With ``parents``, chunk-level gold comes from
    :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks`, parent-level gold from
    :meth:`ParentLevel.lift_gold`.
    """
    from ..local.tokens import count_tokens

    spec = as_parents(parents) or Parents()
    level = resolve_parent_level(object(), spec.store, spec.aggregation) if spec.store is not None else None
    fan = FusionFanout(index, nodes, "hybrid", grid, pool_sizes)
    own = {"index": index, "nodes": nodes, "level": level, "fan": fan}
    out = UnitCandidates.over(grid, pool_sizes, spec.aggregation, level is not None, count_tokens, **own)
    first = out.candidates[0]
    if level is None:
        out.unit_examples["chunk"] = gold_on_chunks(examples, gold_lookup(out.host(first)))
        return out
    records = [
        Chunk(n.node_id, n.get_content(metadata_mode=MetadataMode.NONE), parent_id=chunk_parent_id(n) or n.node_id)
        for n in nodes
    ]
    out.set_parent_gold(
        {n.node_id: chunk_parent_id(n) for n in nodes},
        map_gold_to_chunks(examples, records)[0],
        lambda: level.lift_gold(list(examples), out.host(first)),
        document_key=DOCUMENT_KEY,
    )
    return out
