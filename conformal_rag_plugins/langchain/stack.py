"""Build a LangChain hybrid (Chroma dense + BM25) retriever over corpus entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..calibration.examples import CorpusEntry
from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..local.chroma import add_in_batches, chroma_client, get_collection
from .embedding import MiniLMEmbeddings
from .fusion import ScoredFusionRetriever

__all__ = ["build_chroma_vectorstore", "build_hybrid_retriever"]


def build_chroma_vectorstore(
    entries: Sequence[CorpusEntry],
    *,
    client: Any = None,
    collection_name: str = "conformal-rag-langchain",
    embeddings: Any = None,
) -> Any:
    """A ``langchain_chroma.Chroma`` store on a cosine collection, reused when already filled.

    Examples
    --------
    >>> store = build_chroma_vectorstore(bundled_corpus())  # doctest: +SKIP
    """
    from langchain_chroma import Chroma

    client = client if client is not None else chroma_client()
    collection = get_collection(client, collection_name)
    embeddings = embeddings or MiniLMEmbeddings()
    ids = [e.id for e in entries]
    have = set(collection.get(ids=ids, include=[])["ids"])
    todo = [e for e in entries if e.id not in have]
    if todo:
        vectors = embeddings.embed_documents([e.text for e in todo])
        add_in_batches(
            collection,
            [e.id for e in todo],
            vectors,
            [e.text for e in todo],
            [{"title": e.title} if e.title else {"title": ""} for e in todo],
        )
    return Chroma(client=client, collection_name=collection_name, embedding_function=embeddings)


def build_hybrid_retriever(
    store: Any,
    entries: Sequence[CorpusEntry],
    *,
    pool_size: int = 50,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    method: str = "zscore",
) -> ScoredFusionRetriever:
    """Dense + BM25 fusion that keeps scores in ``metadata['score']``."""
    return ScoredFusionRetriever.from_vectorstore(
        store,
        [e.id for e in entries],
        [e.text for e in entries],
        k=pool_size,
        weight=dense_weight,
        method=method,
    )
