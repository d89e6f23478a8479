"""Calibrate a ``ConformalDocumentCompressor`` through the compression pipeline it will run in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from ..datasets.examples import CalibrationExample
from ..labelling.gold_ids import gold_on_chunks
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.compression import base_pool_size, check_base_count
from ..retrieval.conformalizer import calibrate_on_host
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.options import RetrievalOptions, with_level
from ..retrieval.pool_calibration import CandidatePool
from .compressor import compressor_fingerprint, score_documents
from .fingerprint import fingerprint_of
from .host import all_ids, doc_id, existing_ids, gold_lookup


def _base_fingerprint(base_retriever: BaseRetriever) -> Fingerprint:
    store = getattr(base_retriever, "vectorstore", None)
    return fingerprint_of(store if store is not None else base_retriever)


@dataclass(frozen=True)
class CompressorHost:
    """A compression pipeline as a ``RetrievalHost``: the base retriever, then the compressor's scoring.

    ``embeddings``: what the compressor scores with (cosine); else the base retriever's ``metadata['score']``.
    """

    base_retriever: BaseRetriever
    pool_size: int
    embeddings: Embeddings | None = None

    def fetch(self, question: str, group_key: str | None = None) -> CandidatePool:
        docs = self.base_retriever.invoke(question)
        check_base_count(len(docs), self.pool_size)
        scores = score_documents(question, docs, self.embeddings)
        ids = [doc_id(d) or f"doc-{i}" for i, d in enumerate(docs)]
        groups = None if group_key is None else [d.metadata.get(group_key) for d in docs]
        return CandidatePool.from_unsorted(ids, [d.page_content for d in docs], scores.tolist(), groups)

    def existing_ids(self, ids: Sequence[str]) -> set[str] | None:
        return existing_ids(self.base_retriever, ids)

    def all_ids(self) -> list[str] | None:
        return all_ids(self.base_retriever)

    def fingerprint(self) -> Fingerprint:
        return compressor_fingerprint(_base_fingerprint(self.base_retriever), self.embeddings)

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        return gold_on_chunks(examples, gold_lookup(self.base_retriever))


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

    Each question goes through ``base_retriever.invoke`` and the scoring the compressor applies at
    query time (cosine with ``embeddings``, else the base retriever's ``metadata['score']``), so the
    calibrated scores are the ones the compressor thresholds.

    Parameters
    ----------
    base_retriever : BaseRetriever
        The ``ContextualCompressionRetriever``'s base retriever, e.g.
        ``store.as_retriever(search_kwargs={"k": 50})``; its ``k`` is the pool size.
    examples : sequence of CalibrationExample
        Questions with gold texts or gold ids: chunk ids (``Document.id``) or document ids (the
        chunks' ``metadata["doc_id"]``), mapped by the one gold-id rule (docs: Gold ids); counted in
        ``labels_["gold_rule"]``.
    embeddings : Embeddings, optional
        What the compressor scores with (as ``EmbeddingsFilter(embeddings=...)``).
    confidence_level : float, default 0.9
        Target probability that a gold chunk is kept (or set it in ``options``).
    pool_size : int, optional
        Must equal the base retriever's ``k`` when both are known.
    options : RetrievalOptions, optional
        :class:`~conformal_rag_plugins.retrieval.options.RetrievalOptions`.

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> cal = calibrate_compressor(store.as_retriever(search_kwargs={"k": 50}), examples)  # doctest: +SKIP
    """
    reader = CompressorHost(base_retriever, base_pool_size(base_retriever, pool_size), embeddings)
    return calibrate_on_host(reader, examples, with_level(options, confidence_level))
