"""Describe a LangChain vector store or retriever as a :class:`Fingerprint`."""

from __future__ import annotations

from typing import Any

from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from ..local.chroma import chroma_space
from ..retrieval.fingerprint import Fingerprint
from .host import raw_score_kind


def describe_embeddings(embeddings: Any) -> tuple[str, int | None]:
    """Model name and dimension of an embeddings object (one probe call)."""
    if embeddings is None:
        return "none", None
    name = getattr(embeddings, "model_name", None) or getattr(embeddings, "model", None) or type(embeddings).__name__
    dim = len(embeddings.embed_query("dimension probe"))
    return str(name), dim


def _vectorstore_print(vs: VectorStore) -> tuple[str, str, str, int | None, str]:
    store = type(vs).__name__
    collection = getattr(vs, "_collection", None)
    space = chroma_space(collection) if collection is not None else "unknown"
    name, dim = describe_embeddings(getattr(vs, "embeddings", None))
    kind = raw_score_kind(vs)
    if type(vs) is InMemoryVectorStore and kind == "similarity":
        space, scale = "cosine", "cosine"  # similarity_search_with_score: cosine similarity
    elif kind is not None:  # the store's raw scores, distances negated so that higher is better
        scale = f"{'-' if kind == 'distance' else ''}{store}.similarity_search_with_score"
    elif store == "Chroma":
        scale = {"cosine": "1-distance", "l2": "1-distance/sqrt2", "ip": "1-distance"}.get(space, space)
    else:
        scale = f"{store}.relevance_score"
    return store, space, name, dim, scale


def fingerprint_of(host: VectorStore | BaseRetriever) -> Fingerprint:
    """Fingerprint of a host: vector store or scored retriever.

    A store with relevance scores records their scale (Chroma: ``1-distance``); one without records
    what ``similarity_search_with_score`` returns (``InMemoryVectorStore``: ``cosine``; else
    ``<Store>.similarity_search_with_score``, with a leading ``-`` when its distances are negated).
    """
    if isinstance(host, VectorStore):
        store, space, name, dim, scale = _vectorstore_print(host)
        return Fingerprint("langchain", store, space, name, dim, scale, "dense")
    describe = getattr(host, "conformal_fingerprint", None)
    if callable(describe):
        return describe()
    return Fingerprint(
        "langchain",
        type(host).__name__,
        "unknown",
        "unknown",
        None,
        f"{type(host).__name__}.metadata[score]",
        type(host).__name__,
    )
