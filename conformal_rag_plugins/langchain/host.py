"""Read candidate pools from a LangChain host, on the host's own score scale."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from ..calibration.pool_calibration import CandidatePool
from ..core.errors import ConformalError

__all__ = [
    "Host",
    "afetch_pool",
    "all_ids",
    "doc_id",
    "existing_ids",
    "fetch_pairs",
    "fetch_pool",
    "pool_from_pairs",
    "texts_by_id",
]

Host = VectorStore | BaseRetriever
SCORE_KEY = "score"


def doc_id(doc: Document) -> str | None:
    """A document's id: ``Document.id`` or ``metadata['id']``."""
    return doc.id or doc.metadata.get("id")


def pool_from_pairs(pairs: Sequence[tuple[Document, float]]) -> tuple[CandidatePool, list[Document]]:
    """Candidate pool (best first) and the documents in the same order; a missing or NaN score raises."""
    pool = CandidatePool.from_unsorted(
        [doc_id(d) for d, _ in pairs], [d.page_content for d, _ in pairs], [s for _, s in pairs]
    )
    by_pos = sorted(range(len(pairs)), key=lambda i: -float(pairs[i][1]))
    return pool, [pairs[i][0] for i in by_pos]


def _scored(docs: Sequence[Document], host: BaseRetriever) -> list[tuple[Document, float]]:
    missing = [d for d in docs if SCORE_KEY not in d.metadata]
    if missing:
        raise ConformalError(
            f"{type(host).__name__} returned documents without metadata['{SCORE_KEY}']. Conformal retrieval "
            "needs the host's scores: pass a VectorStore with relevance scores, or a retriever that sets "
            f"metadata['{SCORE_KEY}'] (e.g. ScoredFusionRetriever)."
        )
    return [(d, float(d.metadata[SCORE_KEY])) for d in docs]


def _relevance(host: VectorStore, query: str, k: int) -> list[tuple[Document, float]]:
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Relevance scores must be between")
            return host.similarity_search_with_relevance_scores(query, k=k)
    except NotImplementedError as exc:
        raise ConformalError(
            f"{type(host).__name__} does not implement relevance scores; use a store that does (e.g. Chroma)."
        ) from exc


def fetch_pairs(host: Host, query: str, pool_size: int, *, callbacks: Any = None) -> list[tuple[Document, float]]:
    """The host's top-``pool_size`` ``(document, score)`` pairs, as the host orders them.

    ``callbacks`` (a run manager's ``get_child()``) make a retriever host's run a child of
    the caller's run; a vector store is not a runnable and reports no run of its own.
    """
    if isinstance(host, VectorStore):
        return _relevance(host, query, pool_size)
    return _scored(host.invoke(query, config={"callbacks": callbacks}), host)[:pool_size]


def fetch_pool(host: Host, query: str, pool_size: int) -> tuple[CandidatePool, list[Document]]:
    """The top-``pool_size`` candidates and their documents, best first."""
    return pool_from_pairs(fetch_pairs(host, query, pool_size))


async def afetch_pool(
    host: Host, query: str, pool_size: int, *, callbacks: Any = None
) -> tuple[CandidatePool, list[Document]]:
    """Async :func:`fetch_pool` (``callbacks`` as in :func:`fetch_pairs`)."""
    if isinstance(host, VectorStore):
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Relevance scores must be between")
                pairs = await host.asimilarity_search_with_relevance_scores(query, k=pool_size)
        except NotImplementedError:
            pairs = _relevance(host, query, pool_size)
        return pool_from_pairs(pairs)
    return pool_from_pairs(_scored(await host.ainvoke(query, config={"callbacks": callbacks}), host)[:pool_size])


def existing_ids(host: Host, ids: Sequence[str]) -> set[str] | None:
    """Which of ``ids`` the store holds, or ``None`` when the host cannot tell."""
    store = host if isinstance(host, VectorStore) else getattr(host, "vectorstore", None)
    if store is None:
        return None
    collection = getattr(store, "_collection", None)
    if collection is not None:
        return set(collection.get(ids=list(ids), include=[])["ids"])
    try:
        return {d.id for d in store.get_by_ids(list(ids)) if d.id}
    except NotImplementedError:
        return None


def all_ids(host: Host) -> list[str] | None:
    """Every document id the host can return (a Chroma store, or a fusion over one plus BM25), or ``None``."""
    store = host if isinstance(host, VectorStore) else getattr(host, "vectorstore", None)
    collection = getattr(store, "_collection", None) if store is not None else None
    if collection is None:
        return None
    ids = set(collection.get(include=[])["ids"])
    bm25 = getattr(host, "bm25", None)
    if bm25 is not None and getattr(bm25, "ids", None) is not None:
        ids |= {str(i) for i in bm25.ids}
    return sorted(ids)


def texts_by_id(host: Host, ids: Sequence[str]) -> dict[str, str]:
    """Document texts for ``ids`` from the host's store (Chroma, or any store with ``get_by_ids``)."""
    store = host if isinstance(host, VectorStore) else getattr(host, "vectorstore", None)
    if store is None or not ids:
        return {}
    collection = getattr(store, "_collection", None)
    if collection is not None:
        got = collection.get(ids=list(ids), include=["documents"])
        return {i: d for i, d in zip(got["ids"], got["documents"], strict=True) if d is not None}
    try:
        return {d.id: d.page_content for d in store.get_by_ids(list(ids)) if d.id}
    except NotImplementedError:
        return {}
