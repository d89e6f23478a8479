"""Tune a LangChain hybrid ``ScoredFusionRetriever`` (fusion method and weight) and calibrate it.

The statistics live in :mod:`conformal_rag_plugins.tuning.tuned_calibration`; this file
only builds one ``ScoredFusionRetriever`` per grid point, all sharing the same
vector store and BM25 index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..datasets.examples import CalibrationExample, CorpusEntry
from ..local.bm25 import BM25Index
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions, with_level
from ..tuning.candidates import default_pool_sizes
from ..tuning.fusion_config import DEFAULT_FUSION_GRID, FusionConfig
from ..tuning.options import TuningOptions
from ..tuning.tuned_calibration import fusion_of
from ..tuning.unit_search import calibrate_unit_search
from .fusion import ScoredFusionRetriever
from .tuned_units import corpus_ids_texts, unit_candidates


def hybrid_retrievers(
    vectorstore: VectorStore,
    corpus: Sequence[CorpusEntry | Document],
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    *,
    pool_size: int = 50,
) -> dict[FusionConfig, ScoredFusionRetriever]:
    """One dense + BM25 ``ScoredFusionRetriever`` per configuration (BM25 built once).

    Examples
    --------
    >>> hosts = hybrid_retrievers(store, entries)  # doctest: +SKIP
    """
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
    """Choose what the LLM reads (unit, fusion setting, pool size) and the score family, calibrate on the rest.

    The choice minimises the mean context tokens (MiniLM tokens of the returned units) of the
    conformal set on a seeded optimisation split, searched once per question for every
    candidate; the chosen host alone is then queried on the disjoint calibration split.
    Whole documents (a separate index of unsplit documents) are not a candidate here; compare
    them with ``conformal-rag evaluate --unit auto``.

    Parameters
    ----------
    vectorstore : VectorStore
        The dense store (e.g. ``langchain_chroma.Chroma``).
    corpus : sequence of CorpusEntry or Document
        The same passages, for BM25 (documents need ids).
    examples : sequence of CalibrationExample
        Labelled questions; a seeded ``tuning.optimisation_fraction`` tunes, the disjoint rest calibrates.
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set (or give it in ``options``).
    pool_size : int, default 50
        The base pool.
    options : RetrievalOptions, optional
        ``score`` (default ``"auto"``: the family is tuned too), ``method``/``delta``,
        ``random_state`` (the split's seed), ``strict``, per-group thresholds (``group_by``,
        ``group_fallback``) and ``progress``, as in ``calibrate_retriever``.
    tuning : TuningOptions, optional
        The fusion ``grid`` (default :data:`DEFAULT_FUSION_GRID`), the ``pool_sizes`` to try
        (default ``(pool_size, 2 * pool_size, 4 * pool_size)``), ``optimisation_fraction``
        (default 0.3) and ``objective``.
    parents : BaseStore, Mapping or Parents, optional
        Also try returning the chunks' parent documents (small-to-big, as
        ``calibrate_retriever(..., parents=...)``); the chunks' ``metadata[id_key]`` names the
        parent (default ``"doc_id"``, as ``ParentDocumentRetriever``; a
        :class:`~conformal_rag_plugins.retrieval.host.Parents` gives another ``id_key`` and the
        ``aggregation``). Gold ids may then be chunk or parent ids.

    Returns
    -------
    retriever : ScoredFusionRetriever
        The chosen (chunk) host, ``k`` = the chosen pool; wrap it in
        ``ConformalRetriever(retriever=..., calibration=...)``, adding the same ``parents=`` (and
        ``id_key=``) when ``calibration.selection_["unit"]`` is a parent unit.
    calibration : RetrievalCalibration
        Its fingerprint names the fusion, weight and pool (and ``>parent:max`` at parent level);
        ``selection_`` reports the search (``unit``, ``pool_size``, ``mean_tokens``, ...).

    Examples
    --------
    >>> host, cal = calibrate_hybrid_retriever(store, entries, examples)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    tune = tuning if tuning is not None else TuningOptions()
    sizes = default_pool_sizes(pool_size, tune.pool_sizes)
    found = unit_candidates(vectorstore, corpus, examples, tune.grid, sizes, parents=parents)
    opts = with_level(options, confidence_level)
    return calibrate_unit_search(found, examples, pool_size=pool_size, options=opts, tuning=tune)


def hybrid_from_calibration(
    vectorstore: VectorStore, corpus: Sequence[CorpusEntry | Document], calibration: RetrievalCalibration
) -> ScoredFusionRetriever:
    """Rebuild the tuned host a calibration was made with (its fusion setting and pool size).

    At parent level it is the chunk host: pass the calibration's ``parents=`` to ``ConformalRetriever`` too.

    Examples
    --------
    >>> cal = RetrievalCalibration.load("calibration.json")  # doctest: +SKIP
    >>> host = hybrid_from_calibration(store, entries, cal)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    config = fusion_of(calibration)
    return next(iter(hybrid_retrievers(vectorstore, corpus, [config], pool_size=calibration.pool_size_).values()))
