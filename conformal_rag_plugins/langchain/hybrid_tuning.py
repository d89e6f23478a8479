"""Tune and calibrate a LangChain hybrid ``ScoredFusionRetriever`` (the search is ``tuning.unit_search``'s)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..datasets.examples import CalibrationExample, CorpusEntry
from ..local.bm25 import BM25Index
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..tuning.fusion_config import DEFAULT_FUSION_GRID, FusionConfig
from ..tuning.options import TuningOptions
from ..tuning.tuned_calibration import fusion_of
from ..tuning.unit_search import tune_hybrid
from .fusion import ScoredFusionRetriever
from .tuned_units import corpus_ids_texts, unit_candidates


def hybrid_retrievers(
    vectorstore: VectorStore,
    corpus: Sequence[CorpusEntry | Document],
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    *,
    pool_size: int = 50,
) -> dict[FusionConfig, ScoredFusionRetriever]:
    """One dense + BM25 ``ScoredFusionRetriever`` per configuration (BM25 built once)."""
    bm25 = BM25Index(*corpus_ids_texts(corpus))
    return {
        c: ScoredFusionRetriever(vectorstore=vectorstore, bm25=bm25, k=pool_size, weight=c.weight, method=c.method)
        for c in grid
    }


def calibrate_hybrid_retriever(
    vectorstore: VectorStore,
    corpus: Sequence[CorpusEntry | Document],
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float | None = None,
    pool_size: int = 50,
    options: RetrievalOptions | None = None,
    tuning: TuningOptions | None = None,
    parents: Any = None,
) -> tuple[ScoredFusionRetriever, RetrievalCalibration]:
    """:func:`~conformal_rag_plugins.tuning.unit_search.tune_hybrid` over one ``ScoredFusionRetriever`` per candidate.

    Chooses what the LLM reads (unit, fusion setting, pool size) and the score family, calibrates on
    the rest. ``vectorstore``: the dense store (e.g. ``langchain_chroma.Chroma``); ``corpus``: the
    same passages (``CorpusEntry`` or ``Document`` with ids), for BM25; ``examples``: gold as chunk
    ids or document ids (``metadata["doc_id"]``), by the one gold-id rule (docs: Gold ids);
    ``confidence_level``, ``pool_size`` (default 50), ``options``, ``tuning``: as in ``tune_hybrid``;
    ``parents`` (``BaseStore``, mapping or ``Parents`` for another ``id_key``): also try returning the
    chunks' parent documents, named by the chunks' ``metadata["doc_id"]`` (gold may then be chunk or parent ids).

    Returns ``(retriever, calibration)``: wrap them in ``ConformalRetriever(retriever=...,
    calibration=...)``, with the same ``parents=`` (and ``id_key=``) for a parent unit.

    >>> host, cal = calibrate_hybrid_retriever(store, entries, examples)  # doctest: +SKIP
    """
    candidates = partial(unit_candidates, vectorstore, corpus, examples, parents=parents)
    return tune_hybrid(candidates, examples, confidence_level, pool_size, options, tuning)


def hybrid_from_calibration(
    vectorstore: VectorStore, corpus: Sequence[CorpusEntry | Document], calibration: RetrievalCalibration
) -> ScoredFusionRetriever:
    """Rebuild the tuned host a calibration was made with (its fusion setting and pool size).

    At parent level it is the chunk host: pass the calibration's ``parents=`` to ``ConformalRetriever`` too.
    """
    config = fusion_of(calibration)
    return next(iter(hybrid_retrievers(vectorstore, corpus, [config], pool_size=calibration.pool_size_).values()))
