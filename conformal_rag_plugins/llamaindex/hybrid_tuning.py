"""Tune and calibrate a LlamaIndex hybrid ``QueryFusionRetriever`` (the search is ``tuning.unit_search``'s)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import BaseNode

from ..datasets.examples import CalibrationExample
from ..local.llamaindex_stack import build_hybrid_retriever
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..tuning.fusion_config import DEFAULT_FUSION_GRID, FusionConfig
from ..tuning.options import TuningOptions
from ..tuning.tuned_calibration import fusion_of
from ..tuning.unit_search import tune_hybrid
from .host import DEFAULT_POOL_SIZE
from .tuned_units import unit_candidates


def hybrid_retrievers(
    index: VectorStoreIndex,
    nodes: Sequence[BaseNode],
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> dict[FusionConfig, QueryFusionRetriever]:
    """One dense + BM25 ``QueryFusionRetriever`` per configuration (BM25 built once)."""
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
    confidence_level: float | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
    options: RetrievalOptions | None = None,
    tuning: TuningOptions | None = None,
    parents: Any = None,
) -> tuple[QueryFusionRetriever, RetrievalCalibration]:
    """:func:`~conformal_rag_plugins.tuning.unit_search.tune_hybrid` over one ``QueryFusionRetriever`` per candidate.

    Chooses what the LLM reads (unit, fusion setting, pool size) and the score family, calibrates on
    the rest. ``index``: the dense index (e.g. ``local.llamaindex_stack.build_chroma_index``);
    ``nodes``: the same nodes, for BM25; ``examples``: gold as node ids or document ids
    (``ref_doc_id``), by the one gold-id rule (docs: Gold ids); ``confidence_level``, ``pool_size``
    (default 50), ``options``, ``tuning``: as in ``tune_hybrid``; ``parents`` (docstore,
    StorageContext, mapping, list of nodes or ``Parents``): also try returning the chunks' parents,
    as in :func:`calibrate_retriever` (gold may then be chunk, parent or document ids).

    Returns ``(retriever, calibration)``: wrap them in ``ConformalRetriever(retriever=...,
    calibration=...)``, with the same ``parents=`` when ``calibration.selection_["unit"]`` is a parent unit.

    >>> host, cal = calibrate_hybrid_retriever(index, nodes, examples)  # doctest: +SKIP
    """
    candidates = partial(unit_candidates, index, nodes, examples, parents=parents)
    return tune_hybrid(candidates, examples, confidence_level, pool_size, options, tuning)


def hybrid_from_calibration(
    index: VectorStoreIndex, nodes: Sequence[BaseNode], calibration: RetrievalCalibration
) -> QueryFusionRetriever:
    """Rebuild the tuned host a calibration was made with (its fusion setting and pool size).

    At parent level it is the chunk host: pass the calibration's ``parents=`` to ``ConformalRetriever`` too.
    """
    config = fusion_of(calibration)
    return build_hybrid_retriever(
        index, nodes, pool_size=calibration.pool_size_, dense_weight=config.weight, mode=config.method
    )
