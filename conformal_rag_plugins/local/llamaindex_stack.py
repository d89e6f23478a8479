"""Build a LlamaIndex hybrid (Chroma dense + BM25) retriever over corpus entries on the offline stack."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode, TextNode

from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..datasets.examples import CorpusEntry
from ..runtime.progress import progress_enabled
from .chroma import open_collection, stored_ids
from .llamaindex_models import MiniLMEmbedding
from .tokens import silenced_truncation


def _node(entry: CorpusEntry) -> TextNode:
    metadata: dict[str, Any] = {"title": entry.title} if entry.title else {}
    parent = getattr(entry, "parent_id", None)
    if parent and parent != entry.id:  # a chunk of a longer entry: keep its document id, but do not embed it
        metadata["parent_id"] = parent
    return TextNode(
        id_=entry.id,
        text=entry.text,
        metadata=metadata,
        excluded_embed_metadata_keys=["parent_id"],
        excluded_llm_metadata_keys=["parent_id"],
    )


def nodes_from_entries(entries: Sequence[CorpusEntry]) -> list[TextNode]:
    """One ``TextNode`` per entry (or chunk), with the entry id as node id.

    A chunk of a longer entry also records ``metadata["parent_id"]`` (excluded from embedded and LLM text).

    Examples
    --------
    >>> from conformal_rag_plugins.labelling.chunk_records import Chunk
    >>> node = nodes_from_entries([Chunk("d::chunk0", "Rollo.", parent_id="d")])[0]
    >>> node.node_id, node.metadata
    ('d::chunk0', {'parent_id': 'd'})
    """
    return [_node(e) for e in entries]


def build_chroma_index(
    entries: Sequence[CorpusEntry],
    *,
    client: Any = None,
    collection_name: str = "conformal-rag-llamaindex",
    embed_model: Any = None,
    show_progress: bool = False,
    warn_truncation: bool = True,
) -> tuple[VectorStoreIndex, list[TextNode]]:
    """A ``VectorStoreIndex`` on a cosine Chroma collection, reused when already filled.

    Node ids are the entry ids (the same on every rebuild). A ``TruncationWarning`` counts entries
    past MiniLM's 254-token window; ``warn_truncation=False`` silences it where whole documents are
    indexed on purpose.
    """
    _, collection = open_collection(client, collection_name)
    nodes = nodes_from_entries(entries)
    index = index_nodes(nodes, collection, embed_model, show_progress=show_progress, warn_truncation=warn_truncation)
    return index, nodes


def index_nodes(nodes: Sequence[BaseNode], collection: Any, embed_model: Any = None, *, show_progress: bool = False,
                warn_truncation: bool = True) -> VectorStoreIndex:  # fmt: skip
    """A ``VectorStoreIndex`` on a Chroma ``collection`` after embedding the ``nodes`` it lacks (MiniLM by default).

    A MiniLM embedding warns once (``TruncationWarning``) with the count of nodes past its window, unless
    ``warn_truncation=False`` (whole documents indexed on purpose).
    """
    from llama_index.vector_stores.chroma import ChromaVectorStore

    embed_model = embed_model or MiniLMEmbedding()
    store = ChromaVectorStore(chroma_collection=collection)
    have = stored_ids(collection, [n.node_id for n in nodes])
    todo = [n for n in nodes if n.node_id not in have]
    if todo:
        context = StorageContext.from_defaults(vector_store=store)
        with silenced_truncation(not warn_truncation):
            VectorStoreIndex(
                todo, storage_context=context, embed_model=embed_model, show_progress=progress_enabled(show_progress)
            )
    return VectorStoreIndex.from_vector_store(store, embed_model=embed_model)


#: LlamaIndex ``FUSION_MODES`` for the library's fusion method names.
FUSION_MODES = {"zscore": "dist_based_score", "minmax": "relative_score"}


def build_hybrid_retriever(
    index: VectorStoreIndex,
    nodes: Sequence[TextNode],
    *,
    pool_size: int = 50,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    mode: str = "dist_based_score",
    bm25: Any = None,
) -> QueryFusionRetriever:
    """``QueryFusionRetriever`` over the dense index and ``BM25Retriever`` (no LLM call).

    ``mode``: ``dist_based_score`` (mean +/- 3 std, alias ``"zscore"``) or ``relative_score``
    (min-max, alias ``"minmax"``). A prebuilt ``bm25`` is shared between fusion settings.
    """
    from llama_index.core.llms import MockLLM
    from llama_index.retrievers.bm25 import BM25Retriever

    mode = FUSION_MODES.get(mode, mode)
    dense = index.as_retriever(similarity_top_k=pool_size)
    if bm25 is None:
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
