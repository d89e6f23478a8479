"""Tune a LlamaIndex hybrid ``QueryFusionRetriever`` (fusion mode and weights) and calibrate it.

The statistics live in :mod:`conformal_rag_plugins.calibration.tuned_calibration`; this file
only builds one ``QueryFusionRetriever`` per grid point, all sharing the same
dense index and BM25 retriever.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode

from ..calibration.examples import CalibrationExample
from ..calibration.fingerprint import corpus_digest
from ..calibration.groups import GroupBy
from ..calibration.pool_calibration import CandidatePool, check_gold_ids
from ..calibration.retrieval import RetrievalCalibration
from ..calibration.tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig, calibrate_tuned, fusion_of
from .calibrate import DEFAULT_POOL_SIZE
from .fingerprint import fingerprint_of
from .host import all_ids, existing_ids, pool_from_nodes
from .stack import build_hybrid_retriever

__all__ = ["calibrate_hybrid_retriever", "hybrid_from_calibration", "hybrid_retrievers"]


def hybrid_retrievers(
    index: VectorStoreIndex,
    nodes: Sequence[BaseNode],
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> dict[FusionConfig, QueryFusionRetriever]:
    """One dense + BM25 ``QueryFusionRetriever`` per configuration (BM25 built once).

    Examples
    --------
    >>> hosts = hybrid_retrievers(index, nodes)  # doctest: +SKIP
    >>> sorted(c.key for c in hosts)  # doctest: +SKIP
    ['minmax:0.3', 'minmax:0.5', 'minmax:0.7', 'zscore:0.3', 'zscore:0.5', 'zscore:0.7']
    """
    from llama_index.retrievers.bm25 import BM25Retriever

    bm25 = BM25Retriever.from_defaults(nodes=list(nodes), similarity_top_k=pool_size)
    return {
        c: build_hybrid_retriever(index, nodes, pool_size=pool_size, dense_weight=c.weight, mode=c.method, bm25=bm25)
        for c in grid
    }


def calibrate_hybrid_retriever(
    index: VectorStoreIndex,
    nodes: Sequence[BaseNode],
    examples: Sequence[CalibrationExample],
    *,
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    confidence_level: float = 0.9,
    score: str = "auto",
    pool_size: int = DEFAULT_POOL_SIZE,
    method: str = "split",
    delta: float | None = None,
    optimisation_fraction: float = 0.3,
    random_state: int = 0,
    strict: bool = False,
    progress: bool = True,
    group_by: GroupBy | None = None,
) -> tuple[QueryFusionRetriever, RetrievalCalibration]:
    """Choose the fusion setting and score family on an optimisation split, calibrate on the rest.

    Parameters
    ----------
    index : VectorStoreIndex
        The dense index (e.g. from :func:`~conformal_rag_plugins.llamaindex.stack.build_chroma_index`).
    nodes : sequence of BaseNode
        The same nodes, for BM25.
    examples : sequence of CalibrationExample
        Labelled questions (node ids as gold); a seeded ``optimisation_fraction`` of
        them tunes, the disjoint rest calibrates.
    grid : sequence of FusionConfig
        Candidate (method, dense weight) pairs; default :data:`DEFAULT_FUSION_GRID`.
    score : {"auto", "relative", "similarity", "rank"}, default "auto"
        ``auto`` tunes the score family too.
    group_by : str or callable, optional
        Per-group (Mondrian) thresholds, as in ``calibrate_retriever``.

    Returns
    -------
    retriever : QueryFusionRetriever
        The chosen host; wrap it in ``ConformalRetriever(retriever=..., calibration=...)``.
    calibration : RetrievalCalibration
        Its fingerprint names the fusion mode and weights; ``selection_`` reports the search.

    Examples
    --------
    >>> host, cal = calibrate_hybrid_retriever(index, nodes, examples)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    hosts = hybrid_retrievers(index, nodes, grid, pool_size=pool_size)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = existing_ids(next(iter(hosts.values())), gold) if gold and hosts else None
    if known is not None:
        check_gold_ids(examples, known)

    def fetcher(host: QueryFusionRetriever) -> Callable[[str], CandidatePool]:
        return lambda q: pool_from_nodes(host.retrieve(q))[0]

    tuned = calibrate_tuned(
        examples,
        {c: fetcher(h) for c, h in hosts.items()},
        lambda c: fingerprint_of(hosts[c]),
        pool_size=pool_size,
        confidence_level=confidence_level,
        score=score,
        method=method,
        delta=delta,
        optimisation_fraction=optimisation_fraction,
        random_state=random_state,
        strict=strict,
        progress=progress,
        group_by=group_by,
    )
    host = hosts[tuned.config]
    return host, replace(tuned.calibration, corpus_=corpus_digest(all_ids(host)))


def hybrid_from_calibration(
    index: VectorStoreIndex, nodes: Sequence[BaseNode], calibration: RetrievalCalibration
) -> QueryFusionRetriever:
    """Rebuild the tuned host a calibration was made with (its fusion setting and pool size).

    Examples
    --------
    >>> cal = RetrievalCalibration.load("calibration.json")  # doctest: +SKIP
    >>> host = hybrid_from_calibration(index, nodes, cal)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    config = fusion_of(calibration)
    return build_hybrid_retriever(
        index, nodes, pool_size=calibration.pool_size_, dense_weight=config.weight, mode=config.method
    )
