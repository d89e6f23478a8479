"""Read candidate pools from a LlamaIndex retriever, on its own score scale."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore

from ..retrieval.pool_calibration import CandidatePool

__all__ = ["all_ids", "document_chunks", "existing_ids", "pool_from_nodes", "texts_by_id"]


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


def existing_ids(retriever: BaseRetriever, ids: Sequence[str]) -> set[str] | None:
    """Which of ``ids`` the host's store holds, or ``None`` when it cannot tell."""
    index = _index_of(retriever)
    if index is None:
        return None
    vs = index.vector_store
    collection = getattr(vs, "_collection", None)
    if collection is not None:
        return set(collection.get(ids=list(ids), include=[])["ids"])
    data = getattr(vs, "data", None)
    if data is not None and hasattr(data, "embedding_dict"):
        return {i for i in ids if i in data.embedding_dict}
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
    if index is None:
        return None
    vs = index.vector_store
    collection = getattr(vs, "_collection", None)
    if collection is not None:
        return list(collection.get(include=[])["ids"])
    data = getattr(vs, "data", None)
    if data is not None and hasattr(data, "embedding_dict"):
        return list(data.embedding_dict)
    return None


def texts_by_id(retriever: BaseRetriever, ids: Sequence[str]) -> dict[str, str]:
    """Chunk texts for ``ids`` from the host's store (Chroma, or any store with ``get_nodes``)."""
    index = _index_of(retriever)
    if index is None or not ids:
        return {}
    vs = index.vector_store
    collection = getattr(vs, "_collection", None)
    if collection is not None:
        got = collection.get(ids=list(ids), include=["documents"])
        return {i: d for i, d in zip(got["ids"], got["documents"], strict=True) if d is not None}
    try:
        nodes = vs.get_nodes(node_ids=list(ids))
    except (NotImplementedError, AttributeError, ValueError):
        nodes = [index.docstore.get_node(i) for i in ids if index.docstore.document_exists(i)]
    return {n.node_id: n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes}


def _node_ids_of_documents(index: Any, doc_ids: set[str]) -> dict[str, list[str]]:
    """Node ids per document (``ref_doc_id``) from the store, else from the index's docstore."""
    vs = index.vector_store
    data = getattr(vs, "data", None)
    by_doc: dict[str, list[str]] = {}
    if data is not None and hasattr(data, "text_id_to_ref_doc_id"):  # SimpleVectorStore
        for node_id, doc in data.text_id_to_ref_doc_id.items():
            if doc in doc_ids:
                by_doc.setdefault(doc, []).append(node_id)
        return by_doc
    try:
        info = index.ref_doc_info
    except (NotImplementedError, AttributeError, ValueError):
        return {}
    return {doc: list(info[doc].node_ids) for doc in doc_ids if doc in info}


def document_chunks(retriever: BaseRetriever, doc_ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """The ``(node id, text)`` chunks of each document id (``Document.id_``, the nodes' ``ref_doc_id``) the store holds.

    Chroma is asked by its ``ref_doc_id`` metadata; a ``SimpleVectorStore`` or any store whose
    index keeps its nodes in the docstore by ``ref_doc_info``. Documents it does not know are left out.
    """
    index = _index_of(retriever)
    wanted = {str(d) for d in doc_ids}
    if index is None or not wanted:
        return {}
    collection = getattr(index.vector_store, "_collection", None)
    if collection is not None:
        got = collection.get(where={"ref_doc_id": {"$in": sorted(wanted)}}, include=["documents", "metadatas"])
        out: dict[str, list[tuple[str, str]]] = {}
        for node_id, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            out.setdefault(str((meta or {}).get("ref_doc_id")), []).append((node_id, text or ""))
        return out
    by_doc = _node_ids_of_documents(index, wanted)
    texts = texts_by_id(retriever, [i for ids in by_doc.values() for i in ids])
    return {doc: [(i, texts.get(i, "")) for i in ids] for doc, ids in by_doc.items()}
