"""One dense and one BM25 retrieval per question, fanned out to every fusion setting and pool size.

Each search runs once at the largest pool; the top-``k`` prefixes are fused with
:func:`~conformal_rag_plugins.retrieval.fanout.fuse_ranked` (``QueryFusionRetriever``'s arithmetic),
so pools equal that host's, scores bit for bit, except where BM25 scores tie:
bm25s orders tied documents differently for another top-k, so they may swap places or, at the
cut, which of them is in the pool (``tests/llamaindex/test_fusion_fanout.py``). Batched pools
equal the one-question path's given the same query vectors (``tests/retrieval/test_fanout_batched.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, ObjectType, QueryBundle
from llama_index.core.vector_stores.types import VectorStoreQueryMode
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from ..local.bm25 import retrieve_batch
from ..local.chroma import MAX_QUERY_ROWS, query_in_batches
from ..local.llamaindex_stack import build_hybrid_retriever
from ..retrieval.fanout import Fanout, FanoutKey, fuse_ranked
from ..retrieval.pool_calibration import CandidatePool
from ..tuning.tuned_calibration import FusionConfig

# Which retriever's list a node came from: its hash and text are read from that retriever's node.
_DENSE, _LEXICAL = 0, 1


class FusionFanout(Fanout):
    """Every ``(fusion setting, pool size)`` pool of one question (or of a list, :meth:`many`, batched).

    ``kind`` ``"dense"``/``"bm25"`` gives ``(None, k)`` keys; ``"hybrid"`` one key per grid point and pool size.

    Examples
    --------
    >>> fan = FusionFanout(index, nodes, "hybrid", DEFAULT_FUSION_GRID, (50, 100))  # doctest: +SKIP
    >>> fan("Who ruled Normandy?")[(FusionConfig("zscore", 0.5), 50)].ids[0]  # doctest: +SKIP
    'Normans#0'
    """

    def __init__(
        self,
        index: VectorStoreIndex,
        nodes: Sequence[BaseNode],
        kind: str,
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
    ) -> None:
        from llama_index.retrievers.bm25 import BM25Retriever

        super().__init__(kind, pool_sizes, max_rows=MAX_QUERY_ROWS)
        top = self.pool_sizes[-1]
        self._dense = index.as_retriever(similarity_top_k=top) if kind != "bm25" else None
        self._bm25 = BM25Retriever.from_defaults(nodes=list(nodes), similarity_top_k=top) if kind != "dense" else None
        self._fusers: dict[FusionConfig, QueryFusionRetriever] = {}
        if kind == "hybrid":
            self._fusers = {
                c: build_hybrid_retriever(
                    index, nodes, pool_size=top, dense_weight=c.weight, mode=c.method, bm25=self._bm25
                )
                for c in grid
            }
        # (source, node id) -> (node hash, node text); computed once per node, not per question and setting.
        self._info: dict[tuple[int, str], tuple[str, str]] = {}
        self._corpus_ids: dict[int, str] = {}

    def _search(self, question: str) -> tuple[list[tuple[str, float | None]], list[tuple[str, float | None]]]:
        dense = self._dense.retrieve(question) if self._dense is not None else []
        lexical = self._bm25.retrieve(question) if self._bm25 is not None else []
        return self._register(_DENSE, dense), self._register(_LEXICAL, lexical)

    def _search_many(self, block: list[str]) -> tuple[list[Any], list[Any]]:
        dense = self._dense_many(block) if self._dense is not None else [[] for _ in block]
        lexical = self._lexical_many(block) if self._bm25 is not None else [[] for _ in block]
        return dense, lexical

    def _register(self, source: int, nodes: Sequence[NodeWithScore]) -> list[tuple[str, float | None]]:
        for n in nodes:
            self._remember(source, n.node)
        return [(n.node.node_id, n.score) for n in nodes]

    def _remember(self, source: int, node: BaseNode) -> str:
        key = (source, node.node_id)
        if key not in self._info:
            self._info[key] = (node.hash, node.get_content(metadata_mode=MetadataMode.NONE))
        return node.node_id

    def _dense_many(self, block: list[str]) -> list[list[tuple[str, float | None]]]:
        retriever = self._dense
        embed = retriever._embed_model
        batch = getattr(embed, "get_query_embeddings", None)
        vectors = batch(block) if callable(batch) else [embed.get_agg_embedding_from_queries([q]) for q in block]
        chroma = _chroma_collection(retriever)
        found: list[list[tuple[str, float | None]] | None] = [None] * len(block)
        if chroma is not None:
            results = query_in_batches(chroma, vectors, retriever.similarity_top_k)
            found = [self._chroma_pairs(r) for r in results]
        return [
            pairs
            if pairs is not None
            else self._register(_DENSE, retriever.retrieve(QueryBundle(query_str=q, embedding=list(v))))
            for q, v, pairs in zip(block, vectors, found, strict=True)
        ]

    def _chroma_pairs(self, result: dict[str, list]) -> list[tuple[str, float | None]] | None:
        """``ChromaVectorStore.query`` scored as the retriever does; ``None`` when a node needs the retriever's path."""
        out: list[tuple[str, float | None]] = []
        for nid, text, metadata, distance in zip(
            result["ids"], result["documents"], result["metadatas"], result["distances"], strict=False
        ):
            if (_DENSE, nid) not in self._info:
                try:
                    node = metadata_dict_to_node(metadata, text=text)
                except Exception:  # a legacy record: the retriever's own path reads it
                    return None
                if node.get_type() != ObjectType.TEXT:  # the retriever would fetch it from the docstore
                    return None
                self._remember(_DENSE, node)
            out.append((nid, math.exp(-distance)))
        return out

    def _lexical_many(self, block: list[str]) -> list[list[tuple[str, float | None]]]:
        bm25 = self._bm25
        indexes, scores = retrieve_batch(
            bm25.bm25,
            block,
            bm25.similarity_top_k,
            token_pattern=bm25.token_pattern,
            stemmer=bm25.stemmer if not bm25.skip_stemming else None,
            weight_mask=bm25.corpus_weight_mask,
        )
        return [
            [(self._corpus_id(idx), float(score)) for idx, score in zip(row, row_scores, strict=True)]
            for row, row_scores in zip(indexes, scores, strict=True)
        ]

    def _corpus_id(self, idx: object) -> str:
        if isinstance(idx, dict):
            return self._remember(_LEXICAL, metadata_dict_to_node(idx))
        i = int(idx)  # type: ignore[call-overload]
        if i not in self._corpus_ids:
            self._corpus_ids[i] = self._remember(_LEXICAL, metadata_dict_to_node(self._bm25.corpus[i]))
        return self._corpus_ids[i]

    def _pool(self, ranked: Iterable[tuple[str, float | None, int]]) -> CandidatePool:
        ranked = list(ranked)
        return CandidatePool.from_unsorted(
            [nid for nid, _, _ in ranked],
            [self._info[(src, nid)][1] for nid, _, src in ranked],
            [s for _, s, _ in ranked],
        )

    def _pools(
        self, dense: list[tuple[str, float | None]], lexical: list[tuple[str, float | None]]
    ) -> dict[FanoutKey, CandidatePool]:
        if self.kind != "hybrid":  # :func:`~.host.pool_from_nodes` of one retriever's list
            source, pairs = (_DENSE, dense) if self.kind == "dense" else (_LEXICAL, lexical)
            ordered = sorted(pairs, key=lambda p: -(p[1] if p[1] is not None else float("nan")))
            return {(None, k): self._pool((nid, s, source) for nid, s in ordered[:k]) for k in self.pool_sizes}
        hashes = {nid: self._info[(_DENSE, nid)][0] for nid, _ in dense}
        hashes.update({nid: self._info[(_LEXICAL, nid)][0] for nid, _ in lexical})
        return {
            (config, k): self._pool(
                fuse_ranked([dense[:k], lexical[:k]], hashes, fuser._retriever_weights, config.method == "zscore")[:k]
            )
            for k in self.pool_sizes
            for config, fuser in self._fusers.items()
        }


def _chroma_collection(retriever: Any) -> Any:
    """The Chroma collection behind a plain ``VectorIndexRetriever`` (no filters, default mode), else ``None``."""
    try:
        from llama_index.vector_stores.chroma import ChromaVectorStore
    except ImportError:  # pragma: no cover - depends on extras
        return None
    store = getattr(retriever, "_vector_store", None)
    plain = (
        getattr(retriever, "_filters", None) is None
        and not getattr(retriever, "_node_ids", None)
        and not getattr(retriever, "_doc_ids", None)
        and not getattr(retriever, "_kwargs", None)
        and getattr(retriever, "_vector_store_query_mode", None) == VectorStoreQueryMode.DEFAULT
    )
    return store.client if isinstance(store, ChromaVectorStore) and plain else None
