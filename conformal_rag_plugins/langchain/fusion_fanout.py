"""One dense and one BM25 search per question, fanned out to every fusion setting and pool size.

Each ``(setting, k)`` pool is :meth:`ScoredFusionRetriever.fuse` of the top-``k`` prefixes of one
search at the largest pool, which is what that host's ``invoke`` computes; :meth:`FusionFanout.many`
batches the searches (same pools bit for bit, given the same query vectors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..local.bm25 import BM25Index
from ..local.chroma import MAX_QUERY_ROWS, query_in_batches
from ..retrieval.fanout import Fanout, FanoutKey
from ..retrieval.pool_calibration import CandidatePool
from ..tuning.tuned_calibration import FusionConfig
from .fusion import ScoredFusionRetriever
from .host import _relevance, pool_from_pairs

#: The ``bm25`` host of ``conformal-rag``: the fusion retriever with dense weight 0.
BM25_ONLY = FusionConfig("zscore", 0.0)


class FusionFanout(Fanout):
    """Every ``(fusion setting, pool size)`` pool of one question (``bm25`` over the same documents).

    Examples
    --------
    >>> fan = FusionFanout(store, BM25Index(ids, texts), "hybrid", DEFAULT_FUSION_GRID, (50, 100))  # doctest: +SKIP
    >>> fan("Who ruled Normandy?")[(FusionConfig("zscore", 0.5), 50)].ids[0]  # doctest: +SKIP
    'Normans#0'
    """

    def __init__(
        self, store: VectorStore, bm25: BM25Index, kind: str, grid: Sequence[FusionConfig], pool_sizes: Sequence[int]
    ) -> None:
        super().__init__(kind, pool_sizes, max_rows=MAX_QUERY_ROWS)
        self.store = store
        self.bm25 = bm25
        configs: Sequence[FusionConfig | None] = (
            [None] if kind == "dense" else [BM25_ONLY] if kind == "bm25" else list(grid)
        )
        self._fusers = {
            (c, k): ScoredFusionRetriever(vectorstore=store, bm25=bm25, k=k, weight=c.weight, method=c.method)
            for c in configs
            if c is not None
            for k in self.pool_sizes
        }

    def _search(self, question: str) -> tuple[list[tuple[Document, float]], list[tuple[str, float]]]:
        top = self.pool_sizes[-1]
        dense = _relevance(self.store, question, top)
        lexical = self.bm25.search(question, top) if self.kind != "dense" else []
        return dense, lexical

    def _search_many(self, block: list[str]) -> tuple[list[Any], list[Any]]:
        top = self.pool_sizes[-1]
        dense = self._dense_many(block, top)
        lexical = self.bm25.search_many(block, top) if self.kind != "dense" else [[] for _ in block]
        return dense, lexical

    def _dense_many(self, block: list[str], top: int) -> list[list[tuple[Document, float]]]:
        """``_relevance(store, q, top)`` per question: one embedding call, batched Chroma queries."""
        collection = _chroma_collection(self.store)
        if collection is None:
            return [_relevance(self.store, q, top) for q in block]
        from langchain_chroma.vectorstores import _results_to_docs_and_scores

        embeddings = self.store.embeddings
        batch = getattr(embeddings, "embed_queries", None)
        vectors = batch(block) if callable(batch) else [embeddings.embed_query(q) for q in block]
        relevance = self.store._select_relevance_score_fn()
        out = []
        for result in query_in_batches(collection, vectors, top):
            pairs = _results_to_docs_and_scores({key: [value] for key, value in result.items()})
            out.append([(doc, relevance(score)) for doc, score in pairs])
        return out

    def _pools(
        self, dense: list[tuple[Document, float]], lexical: list[tuple[str, float]]
    ) -> dict[FanoutKey, CandidatePool]:
        if self.kind == "dense":
            return {(None, k): pool_from_pairs(dense[:k])[0] for k in self.pool_sizes}
        out: dict[FanoutKey, CandidatePool] = {}
        for (config, k), fuser in self._fusers.items():
            docs = fuser.fuse(dense, lexical)
            key = (None, k) if self.kind == "bm25" else (config, k)
            out[key] = pool_from_pairs([(d, float(d.metadata["score"])) for d in docs])[0]
        return out


def _chroma_collection(store: VectorStore) -> Any:
    """The collection of a ``langchain_chroma.Chroma`` store that embeds queries itself, else ``None``."""
    try:
        from langchain_chroma import Chroma
    except ImportError:  # pragma: no cover - depends on extras
        return None
    if not isinstance(store, Chroma) or store.embeddings is None or store.override_relevance_score_fn is not None:
        return None
    return store._collection
