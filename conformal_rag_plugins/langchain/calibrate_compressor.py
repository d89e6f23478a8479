"""Calibrate a ``ConformalDocumentCompressor`` through the compression pipeline it will run in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from ..core.errors import ConformalError
from ..core.validation import check_pool_size
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.pool_calibration import (
    CandidatePool,
    calibrate_from_pools,
    check_gold_ids,
    collect_observations,
    label_counts,
)
from .compressor import compressor_fingerprint, score_documents
from .fingerprint import fingerprint_of
from .host import all_ids, doc_id, existing_ids

__all__ = ["base_retriever_k", "calibrate_compressor"]


def base_retriever_k(base_retriever: BaseRetriever) -> int | None:
    """How many documents the base retriever returns (``search_kwargs['k']`` or ``k``), if it says.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> base_retriever_k(SimpleNamespace(search_kwargs={"k": 50}))
    50
    """
    kwargs = getattr(base_retriever, "search_kwargs", None)
    if isinstance(kwargs, dict) and isinstance(kwargs.get("k"), int):
        return int(kwargs["k"])
    k = getattr(base_retriever, "k", None)
    if isinstance(k, int):
        return k
    if isinstance(kwargs, dict) and hasattr(base_retriever, "vectorstore"):
        return 4  # VectorStoreRetriever's default k
    return None


def _base_fingerprint(base_retriever: BaseRetriever) -> Fingerprint:
    store = getattr(base_retriever, "vectorstore", None)
    return fingerprint_of(store if store is not None else base_retriever)


def calibrate_compressor(
    base_retriever: BaseRetriever,
    examples: Sequence[CalibrationExample],
    *,
    embeddings: Embeddings | None = None,
    confidence_level: float = 0.9,
    score: str = "relative",
    pool_size: int | None = None,
    method: str = "split",
    delta: float | None = None,
    random_state: int = 0,
    strict: bool = False,
    progress: bool = True,
) -> RetrievalCalibration:
    """Calibrate the compressor's threshold by running ``base_retriever`` and the compressor's scoring.

    Every question goes through ``base_retriever.invoke`` and then the same scoring the
    compressor applies at query time (:func:`~conformal_rag_plugins.langchain.compressor.score_documents`:
    cosine with ``embeddings``, else the base retriever's ``metadata['score']``), so the
    calibrated scores are the ones the compressor thresholds.

    Parameters
    ----------
    base_retriever : BaseRetriever
        The ``base_retriever`` of the ``ContextualCompressionRetriever``, e.g.
        ``store.as_retriever(search_kwargs={"k": 50})``; its ``k`` is the pool size.
    examples : sequence of CalibrationExample
        Questions with gold chunk ids (``Document.id``) or texts.
    embeddings : Embeddings, optional
        What the compressor scores with (as ``EmbeddingsFilter(embeddings=...)``).
    confidence_level, score, method, delta, random_state, strict
        As in :func:`~conformal_rag_plugins.langchain.calibrate_retriever`.
    pool_size : int, optional
        Must equal the base retriever's ``k`` when both are known.

    Examples
    --------
    >>> base = store.as_retriever(search_kwargs={"k": 50})  # doctest: +SKIP
    >>> cal = calibrate_compressor(base, examples, embeddings=embeddings)  # doctest: +SKIP
    >>> compressor = ConformalDocumentCompressor(calibration=cal, embeddings=embeddings)  # doctest: +SKIP
    """
    own = base_retriever_k(base_retriever)
    size = check_pool_size(pool_size) if pool_size is not None else own
    if size is None:
        raise ConformalError(f"Cannot tell how many documents {type(base_retriever).__name__} returns; pass pool_size.")
    if own is not None and own != size:
        raise ConformalError(
            f"The base retriever returns k={own} documents but pool_size={size}; configure it with "
            f"search_kwargs={{'k': {size}}}."
        )
    examples = list(examples)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = existing_ids(base_retriever, gold) if gold else None
    if known is not None:
        check_gold_ids(examples, known)

    def fetch(question: str) -> CandidatePool:
        docs = base_retriever.invoke(question)
        if len(docs) > size:
            raise ConformalError(f"The base retriever returned {len(docs)} documents, more than pool_size={size}.")
        scores = score_documents(question, docs, embeddings)
        ids = [doc_id(d) or f"doc-{i}" for i, d in enumerate(docs)]
        return CandidatePool.from_unsorted(ids, [d.page_content for d in docs], scores.tolist())

    observations = collect_observations(examples, fetch, progress=progress)
    cal = calibrate_from_pools(
        observations,
        fingerprint=compressor_fingerprint(_base_fingerprint(base_retriever), embeddings),
        pool_size=size,
        confidence_level=confidence_level,
        score=score,
        method=method,
        delta=delta,
        random_state=random_state,
        strict=strict,
        labels=label_counts(examples),
    )
    return replace(cal, corpus_=corpus_record(all_ids(base_retriever)))
