"""Tune a LangChain hybrid ``ScoredFusionRetriever`` (fusion method and weight) and calibrate it.

The statistics live in :mod:`conformal_rag_plugins.tuning.tuned_calibration`; this file
only builds one ``ScoredFusionRetriever`` per grid point, all sharing the same
vector store and BM25 index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..datasets.examples import CalibrationExample, CorpusEntry
from ..local.bm25 import BM25Index
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.groups import GroupBy
from ..tuning.candidates import default_pool_sizes
from ..tuning.tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig, calibrate_tuned, fusion_of
from .fusion import ScoredFusionRetriever
from .host import all_ids, doc_id
from .tuned_units import unit_candidates

__all__ = ["calibrate_hybrid_retriever", "hybrid_from_calibration", "hybrid_retrievers"]


def _ids_texts(corpus: Sequence[CorpusEntry | Document]) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for item in corpus:
        if isinstance(item, Document):
            ident = doc_id(item)
            if ident is None:
                raise ValueError("Every Document needs an id (Document.id or metadata['id']) for BM25 and gold ids.")
            ids.append(ident)
            texts.append(item.page_content)
        else:
            ids.append(item.id)
            texts.append(item.text)
    return ids, texts


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
    bm25 = BM25Index(*_ids_texts(corpus))
    return {
        c: ScoredFusionRetriever(vectorstore=vectorstore, bm25=bm25, k=pool_size, weight=c.weight, method=c.method)
        for c in grid
    }


def calibrate_hybrid_retriever(
    vectorstore: VectorStore,
    corpus: Sequence[CorpusEntry | Document],
    examples: Sequence[CalibrationExample],
    *,
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    confidence_level: float = 0.9,
    score: str = "auto",
    pool_size: int = 50,
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
    id_key: str | None = None,
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
        Labelled questions; a seeded ``optimisation_fraction`` tunes, the disjoint rest calibrates.
    grid : sequence of FusionConfig
        Candidate (method, dense weight) pairs; default :data:`DEFAULT_FUSION_GRID`.
    score : {"auto", "relative", "similarity", "rank"}, default "auto"
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
    parents : BaseStore or Mapping, optional
        Also try returning the chunks' parent documents (small-to-big, as
        ``calibrate_retriever(..., parents=...)``); the chunks' ``metadata[id_key]`` names the
        parent. Gold ids may then be chunk or parent ids.
    parent_aggregation : {"max", "sum"}, default "max"
    id_key : str, optional
        Chunk metadata key of the parent id (default ``"doc_id"``, as ``ParentDocumentRetriever``).

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
    ids, texts = _ids_texts(corpus)
    found = unit_candidates(
        vectorstore,
        corpus,
        ids,
        texts,
        examples,
        grid,
        default_pool_sizes(pool_size, pool_sizes),
        parents=parents,
        id_key=id_key,
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
