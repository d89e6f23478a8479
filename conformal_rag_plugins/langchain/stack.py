"""Build a LangChain hybrid (Chroma dense + BM25) retriever over corpus entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..datasets.examples import CorpusEntry
from ..local.bm25 import BM25Index
from ..local.chroma import add_in_batches, chroma_client, get_collection
from ..local.tokens import warn_if_truncated
from .embedding import MiniLMEmbeddings
from .fusion import ScoredFusionRetriever


def _metadata(entry: CorpusEntry) -> dict[str, str]:
    meta = {"title": entry.title or ""}
    parent = getattr(entry, "parent_id", None)
    if parent and parent != entry.id:  # a chunk of a longer entry
        meta["parent_id"] = parent
    return meta


def build_chroma_vectorstore(
    entries: Sequence[CorpusEntry],
    *,
    client: Any = None,
    collection_name: str = "conformal-rag-langchain",
    embeddings: Any = None,
    warn_truncation: bool = True,
) -> Any:
    """A ``langchain_chroma.Chroma`` store on a cosine collection, reused when already filled.

    With the MiniLM embeddings, a ``UserWarning`` names the entries it embeds past its
    254-token window (split them first); ``warn_truncation=False`` silences it where whole
    documents are indexed on purpose (``evaluate``'s ``document`` unit).

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
    if todo and warn_truncation and isinstance(embeddings, MiniLMEmbeddings):
        warn_if_truncated([e.text for e in todo])
    if todo:
        vectors = embeddings.embed_documents([e.text for e in todo])
        add_in_batches(
            collection,
            [e.id for e in todo],
            vectors,
            [e.text for e in todo],
            [_metadata(e) for e in todo],
        )
    return Chroma(client=client, collection_name=collection_name, embedding_function=embeddings)


def build_hybrid_retriever(
    store: Any,
    entries: Sequence[CorpusEntry],
    *,
    pool_size: int = 50,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    method: str = "zscore",
    bm25: BM25Index | None = None,
) -> ScoredFusionRetriever:
    """Dense + BM25 fusion that keeps scores in ``metadata['score']``.

    Pass a prebuilt ``bm25`` index to share it between several fusion settings.

    Examples
    --------
    >>> hybrid = build_hybrid_retriever(store, entries, dense_weight=0.3, method="minmax")  # doctest: +SKIP
    """
    if bm25 is None:
        bm25 = BM25Index([e.id for e in entries], [e.text for e in entries])
    return ScoredFusionRetriever(vectorstore=store, bm25=bm25, k=pool_size, weight=dense_weight, method=method)
