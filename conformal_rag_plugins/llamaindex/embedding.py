"""LlamaIndex ``BaseEmbedding`` around the offline, cached MiniLM encoder."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from ..local.encoder import MODEL_NAME, MiniLMEncoder, get_encoder


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (offline, normalised, cached) as a LlamaIndex embedding.

    Examples
    --------
    >>> from llama_index.core import Settings  # doctest: +SKIP
    >>> Settings.embed_model = MiniLMEmbedding()  # doctest: +SKIP
    """

    _encoder: MiniLMEncoder = PrivateAttr()

    def __init__(self, encoder: MiniLMEncoder | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", MODEL_NAME)
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(**kwargs)
        self._encoder = encoder or get_encoder()

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._encoder.encode([query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def get_query_embeddings(self, queries: list[str]) -> list[list[float]]:
        """The query embeddings of ``queries`` from one batched (and cached) encoder call.

        Each vector is the one :meth:`get_query_embedding` returns for that query whenever
        the encoder's cache holds it; the first computation of a vector in a batch may
        differ from a one-query computation in the last float32 bits (the model's
        arithmetic depends on the batch shape).
        """
        return self._encoder.encode(queries).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._encoder.encode([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._encoder.encode(texts).tolist()
