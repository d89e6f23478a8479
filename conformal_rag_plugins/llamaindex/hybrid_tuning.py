"""Tune a LlamaIndex hybrid ``QueryFusionRetriever`` (fusion mode and weights) and calibrate it.

The statistics live in :mod:`conformal_rag_plugins.tuning.tuned_calibration`; this file
only builds one ``QueryFusionRetriever`` per grid point, all sharing the same
dense index and BM25 retriever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode

from ..datasets.examples import CalibrationExample
from ..local.llamaindex_stack import build_hybrid_retriever
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.groups import GroupBy
from ..tuning.candidates import default_pool_sizes
from ..tuning.tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig, calibrate_tuned, fusion_of
from .calibrate import DEFAULT_POOL_SIZE
from .host import all_ids
from .tuned_units import unit_candidates

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
    group_fallback: str = "keep_all",
    pool_sizes: Sequence[int] | None = None,
    parents: Any = None,
    parent_aggregation: str = "max",
) -> tuple[QueryFusionRetriever, RetrievalCalibration]:
    """Choose what the LLM reads (unit, fusion setting, pool size) and the score family, calibrate on the rest.

    The choice minimises the mean context tokens (MiniLM tokens of the returned units) of the
    conformal set on a seeded optimisation split, searched once per question for every
    candidate; the chosen host alone is then queried on the disjoint calibration split.
    Whole documents (a separate index of unsplit documents) are not a candidate here; compare
    them with ``conformal-rag evaluate --unit auto``.

    Parameters
    ----------
    index : VectorStoreIndex
        The dense index (e.g. from :func:`~conformal_rag_plugins.local.llamaindex_stack.build_chroma_index`).
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
    group_fallback : {"keep_all", "pooled"}, default "keep_all"
        With ``group_by``: what a group too small for its own threshold, or unseen at
        calibration, gets (every candidate, or the pooled threshold marked not guaranteed).
    pool_sizes : sequence of int, optional
        Pool sizes to try; default ``(pool_size, 2 * pool_size, 4 * pool_size)``. A larger pool
        competes only when the base pool misses more than ``alpha/2`` of the optimisation
        questions; a pool missing more than ``alpha`` is left out when another can reach
        ``1 - alpha``.
    parents : docstore, StorageContext, mapping or list of nodes, optional
        Also try returning the chunks' parents (small-to-big, as ``calibrate_retriever(...,
        parents=...)``); gold ids may then be chunk, parent or document ids.
    parent_aggregation : {"max", "sum"}, default "max"

    Returns
    -------
    retriever : QueryFusionRetriever
        The chosen (chunk) host, with the chosen pool as ``similarity_top_k``; wrap it in
        ``ConformalRetriever(retriever=..., calibration=...)``, adding the same ``parents=``
        when ``calibration.selection_["unit"]`` is a parent unit.
    calibration : RetrievalCalibration
        Its fingerprint names the fusion mode, weights and pool (and ``>parent:max`` at parent
        level); ``selection_`` reports the search (``unit``, ``pool_size``, ``mean_tokens``, ...).

    Examples
    --------
    >>> host, cal = calibrate_hybrid_retriever(index, nodes, examples)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    found = unit_candidates(
        index,
        nodes,
        examples,
        grid,
        default_pool_sizes(pool_size, pool_sizes),
        parents=parents,
        parent_aggregation=parent_aggregation,
    )
    tuned = calibrate_tuned(
        examples,
        {c: found.fetcher(c) for c in found.candidates},
        found.fingerprint,
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
        group_fallback=group_fallback,
        base_of=found.base_of,
        fanout=found.fanout,
        token_costs=found.token_costs,
        unit_examples=found.unit_examples,
    )
    assert tuned.candidate is not None
    host = found.host(tuned.candidate)
    return host, replace(tuned.calibration, corpus_=corpus_record(all_ids(host)))


def hybrid_from_calibration(
    index: VectorStoreIndex, nodes: Sequence[BaseNode], calibration: RetrievalCalibration
) -> QueryFusionRetriever:
    """Rebuild the tuned host a calibration was made with (its fusion setting and pool size).

    At parent level it is the chunk host: pass the calibration's ``parents=`` to ``ConformalRetriever`` too.

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
