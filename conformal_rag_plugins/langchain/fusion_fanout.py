"""One dense and one BM25 search per question, fanned out to every fusion setting and pool size.

The LangChain twin of ``llamaindex/fusion_fanout.py``: each ``(setting, k)`` pool is
:meth:`ScoredFusionRetriever.fuse` of the top-``k`` prefixes of one search at the largest
pool, which is what that host's ``invoke`` computes from its own two searches.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.vectorstores import VectorStore

from ..calibration.pool_calibration import CandidatePool
from ..calibration.tuned_calibration import FusionConfig
from ..core.errors import CalibrationError
from ..local.bm25 import BM25Index
from .fusion import ScoredFusionRetriever
from .host import _relevance, pool_from_pairs

__all__ = ["FusionFanout"]

FanoutKey = tuple[FusionConfig | None, int]

#: The ``bm25`` host of ``conformal-rag``: the fusion retriever with dense weight 0.
BM25_ONLY = FusionConfig("zscore", 0.0)


class FusionFanout:
    """Every ``(fusion setting, pool size)`` pool of one question from one dense and one BM25 search.

    Parameters
    ----------
    store : VectorStore
    bm25 : BM25Index
        Over the same documents.
    kind : {"dense", "bm25", "hybrid"}
    grid : sequence of FusionConfig
    pool_sizes : sequence of int

    Examples
    --------
    >>> fan = FusionFanout(store, BM25Index(ids, texts), "hybrid", DEFAULT_FUSION_GRID, (50, 100))  # doctest: +SKIP
    >>> fan("Who ruled Normandy?")[(FusionConfig("zscore", 0.5), 50)].scores.size  # doctest: +SKIP
    50
    """

    def __init__(
        self, store: VectorStore, bm25: BM25Index, kind: str, grid: Sequence[FusionConfig], pool_sizes: Sequence[int]
    ) -> None:
        if kind not in ("dense", "bm25", "hybrid") or not pool_sizes:
            raise CalibrationError(f"FusionFanout needs a kind in dense/bm25/hybrid and pool sizes, got {kind!r}.")
        self.kind = kind
        self.store = store
        self.bm25 = bm25
        self.pool_sizes = tuple(sorted(set(int(p) for p in pool_sizes)))
        configs: Sequence[FusionConfig | None] = (
            [None] if kind == "dense" else [BM25_ONLY] if kind == "bm25" else list(grid)
        )
        self._fusers = {
            (c, k): ScoredFusionRetriever(vectorstore=store, bm25=bm25, k=k, weight=c.weight, method=c.method)
            for c in configs
            if c is not None
            for k in self.pool_sizes
        }

    def __call__(self, question: str) -> dict[FanoutKey, CandidatePool]:
        """Every pool of ``question``, keyed by ``(fusion setting or None, pool size)``."""
        top = self.pool_sizes[-1]
        dense = _relevance(self.store, question, top)
        if self.kind == "dense":
            return {(None, k): pool_from_pairs(dense[:k])[0] for k in self.pool_sizes}
        lexical = self.bm25.search(question, top)
        out: dict[FanoutKey, CandidatePool] = {}
        for (config, k), fuser in self._fusers.items():
            docs = fuser.fuse(dense, lexical)
            key = (None, k) if self.kind == "bm25" else (config, k)
            out[key] = pool_from_pairs([(d, float(d.metadata["score"])) for d in docs])[0]
        return out
