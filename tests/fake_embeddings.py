"""Deterministic bag-of-words embeddings for LlamaIndex and LangChain: no model, for unit tests of control flow.

Shared by ``tests/labelling/test_gold_ids.py`` and ``tests/report/test_held_out.py``.
"""

from __future__ import annotations

import hashlib

import numpy as np
from langchain_core.embeddings import Embeddings
from llama_index.core.embeddings import BaseEmbedding


def hash_vector(text: str) -> list[float]:
    v = np.zeros(64)
    for word in text.lower().replace("?", " ").replace(".", " ").split():
        v[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
    norm = np.linalg.norm(v)
    return (v / norm if norm else np.full(64, 0.125)).tolist()


class HashEmbedding(BaseEmbedding):
    """LlamaIndex: a deterministic bag-of-words embedding (no model)."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return hash_vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return hash_vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return hash_vector(query)


class HashEmbeddings(Embeddings):
    """LangChain: the same embedding."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [hash_vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return hash_vector(text)
