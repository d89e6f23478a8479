"""Calibrate a ``ConformalDocumentCompressor`` through the compression pipeline it will run in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample
from ..retrieval.calibrate_host import calibrate_host
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.host import agreed_pool_size, check_gold_on_host
from ..retrieval.options import RetrievalOptions, with_level
from ..retrieval.pool_calibration import CandidatePool
from .compressor import compressor_fingerprint, score_documents
from .fingerprint import fingerprint_of
from .host import all_ids, doc_id, existing_ids


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


def _base_pool_size(base_retriever: BaseRetriever, pool_size: int | None) -> int:
    """``pool_size``, else the base retriever's ``k``; they must agree."""
    return agreed_pool_size(
        base_retriever_k(base_retriever),
        pool_size,
        unknown=f"Cannot tell how many documents {type(base_retriever).__name__} returns; pass pool_size.",
        mismatch="The base retriever returns k={own} documents but pool_size={size}; configure it with "
        "search_kwargs={{'k': {size}}}.",
    )


@dataclass(frozen=True)
class CompressorHost:
    """A compression pipeline read as a ``RetrievalHost``: the base retriever, then the compressor's scoring.

    Attributes
    ----------
    base_retriever : BaseRetriever
        The ``ContextualCompressionRetriever``'s ``base_retriever``.
    pool_size : int
        Its ``k``.
    embeddings : Embeddings, optional
        What the compressor scores with (cosine); else the base retriever's ``metadata['score']``.

    Examples
    --------
    >>> host = CompressorHost(store.as_retriever(search_kwargs={"k": 50}), 50, embeddings)  # doctest: +SKIP
    >>> host.fetch("Who founded Normandy?").scores[:2]  # doctest: +SKIP
    array([0.61, 0.58])
    """

    base_retriever: BaseRetriever
    pool_size: int
    embeddings: Embeddings | None = None

    def fetch(self, question: str, group_key: str | None = None) -> CandidatePool:
        """The base retriever's documents scored as the compressor scores them, best first."""
        docs = self.base_retriever.invoke(question)
        if len(docs) > self.pool_size:
            raise ConformalError(
                f"The base retriever returned {len(docs)} documents, more than pool_size={self.pool_size}."
            )
        scores = score_documents(question, docs, self.embeddings)
        ids = [doc_id(d) or f"doc-{i}" for i, d in enumerate(docs)]
        groups = None if group_key is None else [d.metadata.get(group_key) for d in docs]
        return CandidatePool.from_unsorted(ids, [d.page_content for d in docs], scores.tolist(), groups)

    def existing_ids(self, ids: Sequence[str]) -> set[str] | None:
        """Which of ``ids`` the base retriever's store holds, or ``None``."""
        return existing_ids(self.base_retriever, ids)

    def all_ids(self) -> list[str] | None:
        """Every document id of the base retriever's store, or ``None``."""
        return all_ids(self.base_retriever)

    def fingerprint(self) -> Fingerprint:
        """The base retriever's fingerprint with the compressor's scoring."""
        return compressor_fingerprint(_base_fingerprint(self.base_retriever), self.embeddings)

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        """The examples, their gold ids checked against the store."""
        return check_gold_on_host(self, examples)


def calibrate_compressor(
    base_retriever: BaseRetriever,
    examples: Sequence[CalibrationExample],
    *,
    embeddings: Embeddings | None = None,
    confidence_level: float | None = None,
    pool_size: int | None = None,
    options: RetrievalOptions | None = None,
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
    confidence_level : float, default 0.9
        Target probability that a gold chunk is kept (or give it in ``options``).
    pool_size : int, optional
        Must equal the base retriever's ``k`` when both are known.
    options : RetrievalOptions, optional
        Score family, method, delta, random_state, strict, progress, as in
        :func:`~conformal_rag_plugins.langchain.calibrate_retriever`.

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> base = store.as_retriever(search_kwargs={"k": 50})  # doctest: +SKIP
    >>> cal = calibrate_compressor(base, examples, embeddings=embeddings)  # doctest: +SKIP
    >>> compressor = ConformalDocumentCompressor(calibration=cal, embeddings=embeddings)  # doctest: +SKIP
    """
    reader = CompressorHost(base_retriever, _base_pool_size(base_retriever, pool_size), embeddings)
    return calibrate_host(reader, examples, with_level(options, confidence_level))
