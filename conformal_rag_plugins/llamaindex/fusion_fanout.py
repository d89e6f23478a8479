"""One dense and one BM25 retrieval per question, fanned out to every fusion setting and pool size.

Tuning compares many hosts that differ only in the fusion setting and the pool size
(``similarity_top_k``). Querying each ``QueryFusionRetriever`` separately repeats the
same dense and BM25 searches; :class:`FusionFanout` runs each search once at the largest
pool and fuses the top-``k`` prefixes of both lists with the arithmetic of
``QueryFusionRetriever``'s ``relative_score`` / ``dist_based_score`` modes, operation for
operation, so every pool is the one that host returns, scores bit for bit, except where BM25 scores tie:
bm25s orders tied documents differently for another top-k, so they may swap places or, at the cut, which
of them is in the pool
(``tests/integration/test_fusion_fanout.py`` checks it against ``retrieve`` for every
setting and pool size). Node hashes, which that code recomputes for every node and
setting, are computed once per question.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from ..calibration.pool_calibration import CandidatePool
from ..calibration.tuned_calibration import FusionConfig
from ..core.errors import CalibrationError
from .host import pool_from_nodes
from .stack import build_hybrid_retriever

__all__ = ["FusionFanout", "fuse_lists"]

FanoutKey = tuple[FusionConfig | None, int]


def _scaled(scores: list[float], weight: float, dist_based: bool) -> list[float]:
    """One list's scores as ``QueryFusionRetriever._relative_score_fusion`` scales them (same float operations)."""
    if not scores:
        return []
    if dist_based:
        mean = sum(scores) / len(scores)
        std = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
        low, high = mean - 3 * std, mean + 3 * std
    else:
        low, high = min(scores), max(scores)
    out = []
    for x in scores:
        y = (1.0 if high > 0 else 0.0) if high == low else (x - low) / (high - low)
        out.append(y * weight / 1)  # num_queries = 1
    return out


def _text(node: NodeWithScore, cache: dict[str, str]) -> str:
    nid = node.node.node_id
    if nid not in cache:
        cache[nid] = node.node.get_content(metadata_mode=MetadataMode.NONE)
    return cache[nid]


def fuse_lists(
    lists: Sequence[Sequence[NodeWithScore]], hashes: dict[str, str], weights: Sequence[float], dist_based: bool
) -> list[tuple[str, float, NodeWithScore]]:
    """``(node id, fused score, first node)`` best first, as ``QueryFusionRetriever`` fuses ``lists``.

    ``hashes`` maps node id to ``node.hash`` (nodes with the same hash are one candidate).
    """
    merged: dict[str, list] = {}
    for nodes, weight in zip(lists, weights, strict=True):
        scaled = _scaled([n.score or 0.0 for n in nodes], weight, dist_based)
        for n, value in zip(nodes, scaled, strict=True):
            key = hashes[n.node.node_id]
            if key in merged:
                merged[key][1] = merged[key][1] + value
            else:
                merged[key] = [n.node.node_id, value, n]
    ordered = sorted(merged.values(), key=lambda item: item[1], reverse=True)
    return [(nid, score, n) for nid, score, n in ordered]


class FusionFanout:
    """Every ``(fusion setting, pool size)`` pool of one question from one dense and one BM25 search.

    Parameters
    ----------
    index : VectorStoreIndex
    nodes : sequence of BaseNode
        The indexed nodes (for BM25).
    kind : {"dense", "bm25", "hybrid"}
        ``dense``/``bm25`` give ``(None, k)`` keys; ``hybrid`` one key per grid point and pool size.
    grid : sequence of FusionConfig
    pool_sizes : sequence of int

    Examples
    --------
    >>> fan = FusionFanout(index, nodes, "hybrid", DEFAULT_FUSION_GRID, (50, 100))  # doctest: +SKIP
    >>> pools = fan("Who ruled Normandy?")  # doctest: +SKIP
    >>> len(pools[(FusionConfig("zscore", 0.5), 50)].ids)  # doctest: +SKIP
    50
    """

    def __init__(
        self,
        index: VectorStoreIndex,
        nodes: Sequence[BaseNode],
        kind: str,
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
    ) -> None:
        from llama_index.retrievers.bm25 import BM25Retriever

        if kind not in ("dense", "bm25", "hybrid") or not pool_sizes:
            raise CalibrationError(f"FusionFanout needs a kind in dense/bm25/hybrid and pool sizes, got {kind!r}.")
        self.kind = kind
        self.pool_sizes = tuple(sorted(set(int(p) for p in pool_sizes)))
        top = self.pool_sizes[-1]
        self._dense = index.as_retriever(similarity_top_k=top) if kind != "bm25" else None
        self._bm25 = BM25Retriever.from_defaults(nodes=list(nodes), similarity_top_k=top) if kind != "dense" else None
        self._fusers: dict[FusionConfig, QueryFusionRetriever] = {}
        if kind == "hybrid":
            self._fusers = {
                c: build_hybrid_retriever(
                    index, nodes, pool_size=top, dense_weight=c.weight, mode=c.method, bm25=self._bm25
                )
                for c in grid
            }

    def __call__(self, question: str) -> dict[FanoutKey, CandidatePool]:
        """Every pool of ``question``, keyed by ``(fusion setting or None, pool size)``."""
        dense = self._dense.retrieve(question) if self._dense is not None else []
        lexical = self._bm25.retrieve(question) if self._bm25 is not None else []
        hashes = {n.node.node_id: n.node.hash for n in [*dense, *lexical]} if self._fusers else {}
        texts: dict[str, str] = {}
        out: dict[FanoutKey, CandidatePool] = {}
        for k in self.pool_sizes:
            if self.kind == "dense":
                out[(None, k)] = pool_from_nodes(dense[:k])[0]
            elif self.kind == "bm25":
                out[(None, k)] = pool_from_nodes(lexical[:k])[0]
            else:
                for config, fuser in self._fusers.items():
                    fused = fuse_lists(
                        [dense[:k], lexical[:k]], hashes, fuser._retriever_weights, config.method == "zscore"
                    )[:k]
                    out[(config, k)] = CandidatePool.from_unsorted(
                        [nid for nid, _, _ in fused],
                        [_text(n, texts) for _, _, n in fused],
                        [score for _, score, _ in fused],
                    )
        return out
