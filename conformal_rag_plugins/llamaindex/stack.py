"""Build a LlamaIndex hybrid (Chroma dense + BM25) retriever over corpus entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import TextNode

from ..calibration.examples import CorpusEntry
from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..local.chroma import chroma_client, get_collection
from .embedding import MiniLMEmbedding

__all__ = ["build_chroma_index", "build_hybrid_retriever", "nodes_from_entries"]


def nodes_from_entries(entries: Sequence[CorpusEntry]) -> list[TextNode]:
    """One ``TextNode`` per entry, with the entry id as node id."""
    return [TextNode(id_=e.id, text=e.text, metadata={"title": e.title} if e.title else {}) for e in entries]


def build_chroma_index(
    entries: Sequence[CorpusEntry],
    *,
    client: Any = None,
    collection_name: str = "conformal-rag-llamaindex",
    embed_model: Any = None,
    show_progress: bool = False,
) -> tuple[VectorStoreIndex, list[TextNode]]:
    """A ``VectorStoreIndex`` on a cosine Chroma collection, reused when already filled.

    Examples
    --------
    >>> index, nodes = build_chroma_index(bundled_corpus())  # doctest: +SKIP
    """
    from llama_index.vector_stores.chroma import ChromaVectorStore

    client = client if client is not None else chroma_client()
    collection = get_collection(client, collection_name)
    embed_model = embed_model or MiniLMEmbedding()
    store = ChromaVectorStore(chroma_collection=collection)
    nodes = nodes_from_entries(entries)
    have = set(collection.get(ids=[n.node_id for n in nodes], include=[])["ids"])
    todo = [n for n in nodes if n.node_id not in have]
    if todo:
        context = StorageContext.from_defaults(vector_store=store)
        VectorStoreIndex(todo, storage_context=context, embed_model=embed_model, show_progress=show_progress)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    return index, nodes


def build_hybrid_retriever(
    index: VectorStoreIndex,
    nodes: Sequence[TextNode],
    *,
    pool_size: int = 50,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    mode: str = "dist_based_score",
) -> QueryFusionRetriever:
    """``QueryFusionRetriever`` over the dense index and ``BM25Retriever`` (no LLM call).

    ``dist_based_score`` scales each retriever's scores by mean +/- 3 std (a z-score
    style fusion); ``relative_score`` is min-max.
    """
    from llama_index.core.llms import MockLLM
    from llama_index.retrievers.bm25 import BM25Retriever

    dense = index.as_retriever(similarity_top_k=pool_size)
    bm25 = BM25Retriever.from_defaults(nodes=list(nodes), similarity_top_k=pool_size)
    return QueryFusionRetriever(
        [dense, bm25],
        mode=mode,
        similarity_top_k=pool_size,
        num_queries=1,
        use_async=False,
        retriever_weights=[dense_weight, 1.0 - dense_weight],
        llm=MockLLM(),  # num_queries=1: no query rewriting, so the LLM is never called
    )
