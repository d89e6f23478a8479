"""Describe a LlamaIndex retriever (dense, BM25, fusion) as a :class:`Fingerprint`."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever

from ..local.chroma import chroma_space
from ..retrieval.fingerprint import Fingerprint

_SCALES = {"ChromaVectorStore": "exp(-distance)", "SimpleVectorStore": "cosine"}


def pool_size_of(retriever: BaseRetriever) -> int | None:
    """The number of candidates the host returns (``similarity_top_k``), if it says."""
    for attr in ("similarity_top_k", "_similarity_top_k"):
        value = getattr(retriever, attr, None)
        if isinstance(value, int):
            return value
    return None


def _embed_description(embed_model: Any) -> tuple[str, int | None]:
    if embed_model is None:
        return "none", None
    name = getattr(embed_model, "model_name", None) or type(embed_model).__name__
    return str(name), len(embed_model.get_query_embedding("dimension probe"))


def _dense(retriever: Any) -> Fingerprint:
    index = retriever._index
    vs = index.vector_store
    store = type(vs).__name__
    collection = getattr(vs, "_collection", None)
    space = (
        chroma_space(collection)
        if collection is not None
        else ("cosine" if store == "SimpleVectorStore" else "unknown")
    )
    name, dim = _embed_description(getattr(retriever, "_embed_model", None) or index._embed_model)
    mode = getattr(retriever, "_vector_store_query_mode", "default")
    mode = getattr(mode, "value", mode)
    return Fingerprint(
        "llamaindex", store, space, name, dim, _SCALES.get(store, f"{store}.similarity"), f"dense({mode})"
    )


def fingerprint_of(retriever: BaseRetriever) -> Fingerprint:
    """Fingerprint of a host retriever, recursing into a ``QueryFusionRetriever``."""
    kind = type(retriever).__name__
    describe = getattr(retriever, "conformal_fingerprint", None)
    if callable(describe):
        return describe()
    if hasattr(retriever, "_index") and hasattr(retriever._index, "vector_store"):
        return _dense(retriever)
    if kind == "BM25Retriever":
        return Fingerprint("llamaindex", "BM25Retriever", "bm25", "none", None, "bm25", "bm25")
    if kind == "QueryFusionRetriever":
        subs = [fingerprint_of(r) for r in retriever._retrievers]
        dense = next((s for s in subs if s.embedding_dim is not None), subs[0])
        mode = getattr(retriever.mode, "value", retriever.mode)
        weights = ",".join(f"{w:g}" for w in (retriever._retriever_weights or []))
        return Fingerprint(
            "llamaindex",
            "QueryFusionRetriever[" + "+".join(s.store for s in subs) + "]",
            dense.distance,
            dense.embedding_model,
            dense.embedding_dim,
            f"fusion:{mode}",
            f"fusion(mode={mode},weights={weights},top_k={retriever.similarity_top_k},"
            f"subs={'+'.join(s.retriever for s in subs)})",
        )
    return Fingerprint("llamaindex", kind, "unknown", "unknown", None, f"{kind}.score", kind)
