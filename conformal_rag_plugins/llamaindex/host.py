"""Read a LlamaIndex index or retriever: its pools, its store's ids, texts and documents, and gold on its nodes.

:class:`~.retrieval_host.LlamaIndexHost` builds the ``RetrievalHost`` on these readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore

from ..core.errors import ConformalError
from ..core.validation import check_pool_size
from ..datasets.examples import CalibrationExample
from ..labelling.gold_ids import GoldLookup, chunks_of_documents
from ..labelling.gold_ids import gold_on_chunks as map_gold_ids
from ..local.chroma import chunks_by_metadata, stored_texts
from ..retrieval.host import agreed_pool_size
from ..retrieval.pool_calibration import CandidatePool
from .fingerprint import pool_size_of

#: Candidates per query of an index host when no pool size is given.
DEFAULT_POOL_SIZE = 50


def pool_from_nodes(nodes: Sequence[NodeWithScore]) -> tuple[CandidatePool, list[NodeWithScore]]:
    """Candidate pool (best first) and the nodes in the same order."""
    ordered = sorted(nodes, key=lambda n: -(n.score if n.score is not None else float("nan")))
    pool = CandidatePool.from_unsorted(
        [n.node.node_id for n in ordered],
        [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in ordered],
        [n.score for n in ordered],
    )
    return pool, ordered


def _index_of(retriever: Any) -> Any:
    if hasattr(retriever, "_index"):
        return retriever._index
    for sub in getattr(retriever, "_retrievers", []) or []:
        found = _index_of(sub)
        if found is not None:
            return found
    return None


def _store_ids(vs: Any, ids: Sequence[str] | None) -> list[str] | None:
    collection = getattr(vs, "_collection", None)
    if collection is not None:
        return list(collection.get(ids=None if ids is None else list(ids), include=[])["ids"])
    data = getattr(vs, "data", None)
    if data is not None and hasattr(data, "embedding_dict"):
        return list(data.embedding_dict) if ids is None else [i for i in ids if i in data.embedding_dict]
    return None


def existing_ids(retriever: BaseRetriever, ids: Sequence[str]) -> set[str] | None:
    """Which of ``ids`` the host's store holds, or ``None`` when it cannot tell."""
    index = _index_of(retriever)
    if index is None:
        return None
    vs = index.vector_store
    found = _store_ids(vs, ids)
    if found is not None:
        return set(found)
    try:
        return {n.node_id for n in vs.get_nodes(node_ids=list(ids))}
    except (NotImplementedError, AttributeError, ValueError):
        return None


def all_ids(retriever: BaseRetriever) -> list[str] | None:
    """Every chunk id the host can return (Chroma, SimpleVectorStore, BM25, fusion), or ``None`` when unknown."""
    subs = getattr(retriever, "_retrievers", None)
    if subs:
        parts = [all_ids(r) for r in subs]
        return None if any(p is None for p in parts) else sorted({i for p in parts for i in p or ()})
    corpus = getattr(retriever, "corpus", None)
    if type(retriever).__name__ == "BM25Retriever" and isinstance(corpus, list):
        return [str(row.get("node_id")) for row in corpus if isinstance(row, dict)]
    index = getattr(retriever, "_index", None)
    return None if index is None else _store_ids(index.vector_store, None)


def texts_by_id(retriever: BaseRetriever, ids: Sequence[str]) -> dict[str, str]:
    """Chunk texts for ``ids`` from the host's store (Chroma, or any store with ``get_nodes``)."""
    index = _index_of(retriever)
    if index is None or not ids:
        return {}
    vs = index.vector_store
    collection = getattr(vs, "_collection", None)
    if collection is not None:
        return stored_texts(collection, ids)
    try:
        nodes = vs.get_nodes(node_ids=list(ids))
    except (NotImplementedError, AttributeError, ValueError):
        nodes = [index.docstore.get_node(i) for i in ids if index.docstore.document_exists(i)]
    return {n.node_id: n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes}


#: Node metadata key of a chunk's document written by the library's own builders (``nodes_from_entries``).
PARENT_ID_KEY = "parent_id"
#: How a LlamaIndex node's document is found (named in the gold-id error).
DOCUMENT_KEY = (
    "the node's ref_doc_id (its SOURCE relationship: the id_ of the Document it was parsed from), else its "
    f'metadata["{PARENT_ID_KEY}"] (the library\'s own chunk builders)'
)


def _node_ids_of_documents(index: Any, doc_ids: set[str]) -> dict[str, list[str]] | None:
    """Node ids per document: a ``SimpleVectorStore``'s node-to-document table and the docstore's nodes."""
    by_doc: dict[str, list[str]] = {}
    data = getattr(index.vector_store, "data", None)
    table = getattr(data, "text_id_to_ref_doc_id", None) if data is not None else None
    for node_id, doc in (table or {}).items():
        if doc in doc_ids:
            by_doc.setdefault(doc, []).append(node_id)
    docs = getattr(getattr(index, "docstore", None), "docs", None)
    if not docs:
        return by_doc if table is not None else None  # the nodes live only in a store that cannot be asked
    for node in docs.values():
        doc = node.ref_doc_id or (node.metadata or {}).get(PARENT_ID_KEY)
        if doc in doc_ids and node.node_id not in by_doc.get(doc, ()):
            by_doc.setdefault(doc, []).append(node.node_id)
    return by_doc


def document_chunks(retriever: BaseRetriever, doc_ids: Sequence[str]) -> dict[str, list[tuple[str, str]]] | None:
    """``(node id, text)`` chunks per document id the store holds; unknown documents left out.

    A node's document is its ``ref_doc_id``, else its ``metadata["parent_id"]``. Chroma is asked by
    metadata, a ``SimpleVectorStore`` by its node-to-document table, and the index's docstore when it
    holds the nodes; ``None`` when the store cannot tell.
    """
    index = _index_of(retriever)
    wanted = {str(d) for d in doc_ids}
    if index is None:
        return None
    if not wanted:
        return {}
    collection = getattr(index.vector_store, "_collection", None)
    if collection is not None:
        rows = chunks_by_metadata(collection, ("ref_doc_id", PARENT_ID_KEY), sorted(wanted))
        ref = [str(m.get("ref_doc_id")) for *_, m in rows]  # a chunk's document: ref_doc_id, else parent_id
        docs = [r if r in wanted else str(m.get(PARENT_ID_KEY)) for r, (*_, m) in zip(ref, rows, strict=True)]
        return chunks_of_documents(((i, t, d) for (i, t, _), d in zip(rows, docs, strict=True)), wanted)
    by_doc = _node_ids_of_documents(index, wanted)
    if by_doc is None:
        return None
    texts = texts_by_id(retriever, [i for ids in by_doc.values() for i in ids])
    return {doc: [(i, texts.get(i, "")) for i in ids] for doc, ids in by_doc.items()}


def gold_lookup(retriever: BaseRetriever) -> GoldLookup:
    """The host's store as the one gold-id rule reads it (node ids; a document's nodes, see :func:`document_chunks`)."""
    return GoldLookup(
        lambda ids: existing_ids(retriever, ids), lambda docs: document_chunks(retriever, docs), DOCUMENT_KEY
    )


def resolve_host(host: Any, pool_size: int | None) -> tuple[BaseRetriever, int]:
    """Turn an index or retriever into (retriever, pool size), checking they agree."""
    if pool_size is not None:
        pool_size = check_pool_size(pool_size)
    if isinstance(host, BaseRetriever):
        size = agreed_pool_size(
            pool_size_of(host),
            pool_size,
            unknown=f"Cannot tell how many candidates {type(host).__name__} returns; pass pool_size=...",
            mismatch="The host retriever returns similarity_top_k={own} candidates but pool_size={size}; "
            "configure the host with the calibrated pool size.",
        )
        return host, size
    if hasattr(host, "as_retriever"):
        size = DEFAULT_POOL_SIZE if pool_size is None else pool_size
        return host.as_retriever(similarity_top_k=size), size
    raise ConformalError(f"Expected a LlamaIndex index or BaseRetriever, got {type(host).__name__}.")


def gold_on_chunks(retriever: BaseRetriever, examples: list[CalibrationExample]) -> list[CalibrationExample]:
    """The examples with gold on the host's nodes: :func:`~..labelling.gold_ids.gold_on_chunks` (the one rule).

    Ids that are neither node nor document ids raise :class:`~conformal_rag_plugins.core.errors.CalibrationError`
    (when the store can tell).
    """
    return map_gold_ids(examples, gold_lookup(retriever))
