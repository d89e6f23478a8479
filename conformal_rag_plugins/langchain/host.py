"""Read a LangChain vector store or scored retriever: its scored pools, its store's ids, texts and documents.

:class:`~.retrieval_host.LangChainHost` builds the ``RetrievalHost`` on these readers.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from ..core.errors import ConformalError, FingerprintMismatchError
from ..core.validation import check_pool_size
from ..labelling.gold_ids import GoldLookup, chunks_of_documents
from ..local.chroma import chunks_by_metadata, stored_ids, stored_texts
from ..retrieval.pool_calibration import CandidatePool
from ..retrieval.score_direction import higher_is_better, runs_against, score_direction

Host = VectorStore | BaseRetriever
SCORE_KEY = "score"


@contextmanager
def quiet_relevance() -> Iterator[None]:
    """Without the store's "Relevance scores must be between 0 and 1" warning: its scores are used as they are."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Relevance scores must be between")
        yield


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


_RELEVANCE_METHODS = ("similarity_search_with_relevance_scores", "_similarity_search_with_relevance_scores")
_PROBE = "which way do the scores of this store point"
_probed: weakref.WeakKeyDictionary[VectorStore, str] = weakref.WeakKeyDictionary()


def _has_relevance(store: VectorStore) -> bool:
    cls = type(store)
    if any(getattr(cls, m, None) is not getattr(VectorStore, m) for m in _RELEVANCE_METHODS):
        return True  # the store computes relevance scores its own way
    try:
        store._select_relevance_score_fn()
    except NotImplementedError:
        return False
    except Exception:  # e.g. Chroma's unknown distance: the store raises its own error at query time
        return True
    return True


def _probe_kind(store: VectorStore) -> str:
    scores = [float(s) for _, s in store.similarity_search_with_score(_PROBE, k=8)]
    kind = score_direction(scores)
    if kind is not None:
        return kind
    raise ConformalError(
        f"{type(store).__name__} has no relevance scores, and a probe query returned "
        f"{'scores in no order' if len(set(scores)) > 1 else 'fewer than two distinct scores'}, so it cannot be "
        "told whether its similarity_search_with_score gives similarities or distances. Use a store with relevance "
        "scores (e.g. Chroma), or add more documents."
    )


def raw_score_kind(store: VectorStore) -> str | None:
    """How a store without relevance scores ranks: ``"similarity"`` or ``"distance"``; ``None`` with relevance scores.

    ``InMemoryVectorStore`` returns cosine similarity; another store's direction is read once from
    the order of a probe query's results.

    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> raw_score_kind(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))
    'similarity'
    """
    if _has_relevance(store):
        return None
    if type(store) is InMemoryVectorStore:  # a subclass may score otherwise
        return "similarity"  # cosine similarity of the embeddings
    try:
        kind = _probed.get(store)
    except TypeError:  # not weak-referenceable: probe every time
        return _probe_kind(store)
    if kind is None:
        kind = _probe_kind(store)
        _probed[store] = kind
    return kind


def _on_scale(host: VectorStore, kind: str, pairs: list[tuple[Document, float]]) -> list[tuple[Document, float]]:
    """Raw store scores as higher-is-better (distances negated), refusing an order against ``kind``."""
    if runs_against([float(s) for _, s in pairs], kind):
        raise FingerprintMismatchError(
            f"{type(host).__name__}.similarity_search_with_score returned its results in "
            f"{'decreasing' if kind == 'distance' else 'increasing'} score order, but its scores were read as "
            f"{'distances' if kind == 'distance' else 'similarities'} (best first): the store's scale changed. "
            "Re-calibrate on the store you query."
        )
    return [(d, higher_is_better(s, kind)) for d, s in pairs]


def _relevance(host: VectorStore, query: str, k: int) -> list[tuple[Document, float]]:
    """The store's top-``k`` pairs on its own scale: relevance scores, else its raw scores (higher is better)."""
    kind = raw_score_kind(host)
    if kind is not None:
        return _on_scale(host, kind, host.similarity_search_with_score(query, k=k))
    try:
        with quiet_relevance():
            return host.similarity_search_with_relevance_scores(query, k=k)
    except NotImplementedError as exc:
        raise ConformalError(
            f"{type(host).__name__} implements neither relevance scores nor similarity_search_with_score; use a "
            "store that does (e.g. Chroma or InMemoryVectorStore)."
        ) from exc


def fetch_pairs(host: Host, query: str, pool_size: int, *, callbacks: Any = None) -> list[tuple[Document, float]]:
    """The host's top-``pool_size`` ``(document, score)`` pairs, as the host orders them.

    ``callbacks`` (a run manager's ``get_child()``) nest a retriever host's run under the caller's;
    a vector store is not a runnable and reports no run.
    """
    if isinstance(host, VectorStore):
        return _relevance(host, query, pool_size)
    return _scored(host.invoke(query, config={"callbacks": callbacks}), host)[:pool_size]


def fetch_pool(host: Host, query: str, pool_size: int) -> tuple[CandidatePool, list[Document]]:
    return pool_from_pairs(fetch_pairs(host, query, pool_size))


async def afetch_pool(
    host: Host, query: str, pool_size: int, *, callbacks: Any = None
) -> tuple[CandidatePool, list[Document]]:
    if isinstance(host, VectorStore):
        kind = raw_score_kind(host)
        if kind is not None:
            return pool_from_pairs(_on_scale(host, kind, await host.asimilarity_search_with_score(query, k=pool_size)))
        try:
            with quiet_relevance():
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
        return stored_ids(collection, ids)
    try:
        return {d.id for d in store.get_by_ids(list(ids)) if d.id}
    except NotImplementedError:
        return None


def all_ids(host: Host) -> list[str] | None:
    """Every document id the host can return (Chroma, in-memory store, a fusion over one plus BM25), or ``None``."""
    store = host if isinstance(host, VectorStore) else getattr(host, "vectorstore", None)
    collection = getattr(store, "_collection", None) if store is not None else None
    if isinstance(store, InMemoryVectorStore):
        ids = {str(i) for i in store.store}
    elif collection is None:
        return None
    else:
        ids = set(collection.get(include=[])["ids"])
    bm25 = getattr(host, "bm25", None)
    if bm25 is not None and getattr(bm25, "ids", None) is not None:
        ids |= {str(i) for i in bm25.ids}
    return sorted(ids)


def texts_by_id(host: Host, ids: Sequence[str]) -> dict[str, str]:
    store = host if isinstance(host, VectorStore) else getattr(host, "vectorstore", None)
    if store is None or not ids:
        return {}
    collection = getattr(store, "_collection", None)
    if collection is not None:
        return stored_texts(collection, ids)
    try:
        return {d.id: d.page_content for d in store.get_by_ids(list(ids)) if d.id}
    except NotImplementedError:
        return {}


#: The chunk metadata key naming its source document (LangChain's ParentDocumentRetriever/MultiVectorRetriever key).
DOC_ID_KEY = "doc_id"
#: The same, as the library's own chunk builders write it (read when ``doc_id`` is absent).
PARENT_ID_KEY = "parent_id"
#: How a LangChain chunk's document is found (named in the gold-id error).
DOCUMENT_KEY = (
    f"the chunk's metadata[\"{DOC_ID_KEY}\"] (the key of LangChain's ParentDocumentRetriever; "
    f'conformal_rag_plugins.local.recursive_splitter sets it), else its metadata["{PARENT_ID_KEY}"]'
)


def _store_of(host: Host) -> VectorStore | None:
    return host if isinstance(host, VectorStore) else getattr(host, "vectorstore", None)


def document_of(metadata: dict[str, Any] | None) -> str | None:
    """The document id a chunk's metadata names (``doc_id``, else ``parent_id``), or ``None``.

    >>> document_of({"doc_id": "a"}), document_of({"parent_id": "b"}), document_of({})
    ('a', 'b', None)
    """
    meta = metadata or {}
    value = meta.get(DOC_ID_KEY) or meta.get(PARENT_ID_KEY)
    return None if value is None else str(value)


def document_chunks(host: Host, doc_ids: Sequence[str]) -> dict[str, list[tuple[str, str]]] | None:
    """``(chunk id, text)`` pairs per document id (:func:`document_of` the chunks); unknown documents left out.

    Chroma is asked with ``where``, an ``InMemoryVectorStore`` read from its ``store``; ``None`` for a
    store that cannot list a document's chunks.

    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
    >>> _ = store.add_documents([Document("x", id="a::chunk0", metadata={"doc_id": "a"})])
    >>> document_chunks(store, ["a", "b"])
    {'a': [('a::chunk0', 'x')]}
    """
    store = _store_of(host)
    wanted = sorted({str(d) for d in doc_ids})
    collection = getattr(store, "_collection", None) if store is not None else None
    if collection is not None:
        rows = chunks_by_metadata(collection, (DOC_ID_KEY, PARENT_ID_KEY), wanted) if wanted else []
    elif isinstance(store, InMemoryVectorStore):
        rows = [(str(i), str(r.get("text", "")), r.get("metadata")) for i, r in store.store.items()]
    else:
        return None
    return chunks_of_documents(((ident, text, document_of(meta)) for ident, text, meta in rows), wanted)


def gold_lookup(host: Host) -> GoldLookup:
    """The host's store as the one gold-id rule reads it (chunk ids; a document's chunks by ``metadata["doc_id"]``)."""
    return GoldLookup(lambda ids: existing_ids(host, ids), lambda docs: document_chunks(host, docs), DOCUMENT_KEY)


def resolve_pool_size(host: Any, pool_size: int | None) -> int:
    """The pool size to query with: ``pool_size`` (>= 1), else the host's ``k``, else 50."""
    host_k = getattr(host, "k", None)
    if pool_size is not None:
        pool_size = check_pool_size(pool_size)
    if pool_size is None:
        return int(host_k) if isinstance(host_k, int) else 50
    if isinstance(host_k, int) and host_k < pool_size:
        raise ConformalError(f"The host retriever returns k={host_k} candidates, fewer than pool_size={pool_size}.")
    return pool_size
