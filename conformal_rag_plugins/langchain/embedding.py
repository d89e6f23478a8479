"""LangChain ``Embeddings`` around the offline, cached MiniLM encoder."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from ..local.encoder import MODEL_NAME, MiniLMEncoder, get_encoder


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (offline, normalised, cached) for LangChain vector stores.

    Examples
    --------
    >>> emb = MiniLMEmbeddings()  # doctest: +SKIP
    >>> len(emb.embed_query("hello"))  # doctest: +SKIP
    384
    """

    model_name = MODEL_NAME

    def __init__(self, encoder: MiniLMEncoder | None = None) -> None:
        self.encoder = encoder or get_encoder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return self.encoder.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.encoder.encode([text])[0].tolist()

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed many queries in one batched (and cached) encoder call.

        Each vector is the one :meth:`embed_query` returns for that query whenever the
        encoder's cache holds it; the first computation of a vector in a batch may differ
        from a one-query computation in the last float32 bits (the model's arithmetic
        depends on the batch shape).
        """
        return self.encoder.encode(texts).tolist()
