"""A LangChain dense + BM25 fusion retriever that keeps the scores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field

from ..core.fusion import DEFAULT_DENSE_WEIGHT, fuse_scores
from ..datasets.examples import CorpusEntry
from ..local.bm25 import BM25Index
from ..retrieval.fingerprint import Fingerprint
from .fingerprint import fingerprint_of
from .host import _relevance, doc_id


class ScoredFusionRetriever(BaseRetriever):
    """Hybrid dense + BM25 retriever whose documents carry ``metadata['score']``.

    The fused score is ``weight * norm(dense) + (1 - weight) * norm(bm25)`` over each retriever's
    top-``k`` candidates, ``norm`` z-score or min-max (``method``); ``metadata`` also keeps
    ``dense_score`` and ``bm25_score``. ``vectorstore`` needs relevance scores (e.g.
    ``langchain_chroma.Chroma``); ``bm25`` indexes the same passages.

    Examples
    --------
    >>> retriever = ScoredFusionRetriever.from_vectorstore(store, ids, texts, k=50)  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    vectorstore: VectorStore
    bm25: BM25Index
    k: int = Field(default=50, ge=1)
    weight: float = Field(default=DEFAULT_DENSE_WEIGHT, ge=0.0, le=1.0)
    method: str = "zscore"

    @classmethod
    def from_vectorstore(
        cls, vectorstore: VectorStore, ids: list[str], texts: list[str], **kwargs: Any
    ) -> ScoredFusionRetriever:
        """Build the BM25 side from the same passages that are in ``vectorstore``."""
        return cls(vectorstore=vectorstore, bm25=BM25Index(ids, texts), **kwargs)

    def conformal_fingerprint(self) -> Fingerprint:
        """The dense store's fingerprint with the fusion settings."""
        dense = fingerprint_of(self.vectorstore)
        return Fingerprint(
            "langchain",
            f"ScoredFusionRetriever[{dense.store}+BM25]",
            dense.distance,
            dense.embedding_model,
            dense.embedding_dim,
            f"fusion:{self.method}",
            f"hybrid(method={self.method},weight={self.weight:g},k={self.k})",
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self.fuse(_relevance(self.vectorstore, query, self.k), self.bm25.search(query, self.k))

    def fuse(self, dense_pairs: list[tuple[Document, float]], lexical: list[tuple[str, float]]) -> list[Document]:
        """Fuse dense ``(document, score)`` pairs with BM25 ``(id, score)`` hits (top ``k`` of each).

        Tuning reuses it on prefixes of one larger search (``fusion_fanout.py``).
        """
        dense_pairs, lexical = dense_pairs[: self.k], lexical[: self.k]
        docs = {doc_id(d): d for d, _ in dense_pairs}
        dense = {doc_id(d): float(s) for d, s in dense_pairs}
        lexical_scores = dict(lexical)
        fused = fuse_scores(dense, lexical_scores, weight=self.weight, method=self.method)[: self.k]
        texts = self.bm25.text_of
        out = []
        for cid, score in fused:
            base = docs.get(cid) or Document(id=cid, page_content=texts(str(cid)), metadata={})
            meta = dict(base.metadata) | {
                "score": score,
                "dense_score": dense.get(cid),
                "bm25_score": lexical_scores.get(cid),
            }
            out.append(Document(id=cid, page_content=base.page_content, metadata=meta))
        return out


def build_hybrid_retriever(
    store: Any,
    entries: Sequence[CorpusEntry],
    *,
    pool_size: int = 50,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    method: str = "zscore",
    bm25: BM25Index | None = None,
) -> ScoredFusionRetriever:
    """Dense + BM25 :class:`ScoredFusionRetriever` over ``entries`` (pass ``bm25`` to share one index)."""
    if bm25 is None:
        bm25 = BM25Index([e.id for e in entries], [e.text for e in entries])
    return ScoredFusionRetriever(vectorstore=store, bm25=bm25, k=pool_size, weight=dense_weight, method=method)
