"""Build a LangChain hybrid (dense + BM25) retriever over corpus entries.

The dense store comes from :func:`conformal_rag_plugins.local.langchain_stack.build_chroma_vectorstore`
(or any vector store with relevance scores); this builder stays in the adapter because it makes the
adapter's :class:`~conformal_rag_plugins.langchain.fusion.ScoredFusionRetriever`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..datasets.examples import CorpusEntry
from ..local.bm25 import BM25Index
from .fusion import ScoredFusionRetriever


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
