"""Tune a LangChain hybrid ``ScoredFusionRetriever`` (fusion method and weight) and calibrate it.

The statistics live in :mod:`conformal_rag_plugins.calibration.tuned_calibration`; this file
only builds one ``ScoredFusionRetriever`` per grid point, all sharing the same
vector store and BM25 index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..calibration.examples import CalibrationExample, CorpusEntry
from ..calibration.fingerprint import corpus_digest
from ..calibration.groups import GroupBy
from ..calibration.pool_calibration import CandidatePool, check_gold_ids
from ..calibration.retrieval import RetrievalCalibration
from ..calibration.tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig, calibrate_tuned, fusion_of
from ..local.bm25 import BM25Index
from .fusion import ScoredFusionRetriever
from .host import all_ids, doc_id, existing_ids, fetch_pool

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
) -> tuple[ScoredFusionRetriever, RetrievalCalibration]:
    """Choose the fusion setting and score family on an optimisation split, calibrate on the rest.

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

    Returns
    -------
    retriever : ScoredFusionRetriever
        The chosen host; wrap it in ``ConformalRetriever(retriever=..., calibration=...)``.
    calibration : RetrievalCalibration

    Examples
    --------
    >>> host, cal = calibrate_hybrid_retriever(store, entries, examples)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    hosts = hybrid_retrievers(vectorstore, corpus, grid, pool_size=pool_size)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = existing_ids(vectorstore, gold) if gold else None
    if known is not None:
        check_gold_ids(examples, known)

    def fetcher(host: ScoredFusionRetriever) -> Callable[[str], CandidatePool]:
        return lambda q: fetch_pool(host, q, pool_size)[0]

    tuned = calibrate_tuned(
        examples,
        {c: fetcher(h) for c, h in hosts.items()},
        lambda c: hosts[c].conformal_fingerprint(),
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
    vectorstore: VectorStore, corpus: Sequence[CorpusEntry | Document], calibration: RetrievalCalibration
) -> ScoredFusionRetriever:
    """Rebuild the tuned host a calibration was made with (its fusion setting and pool size).

    Examples
    --------
    >>> cal = RetrievalCalibration.load("calibration.json")  # doctest: +SKIP
    >>> host = hybrid_from_calibration(store, entries, cal)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(retriever=host, calibration=cal)  # doctest: +SKIP
    """
    config = fusion_of(calibration)
    return next(iter(hybrid_retrievers(vectorstore, corpus, [config], pool_size=calibration.pool_size_).values()))
