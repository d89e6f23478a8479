"""LangChain ``BaseDocumentCompressor``: the calibrated replacement for ``EmbeddingsFilter``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from ..core.errors import ConformalError
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.compression import check_compressor_scoring, compressed_fingerprint, cosine_scores
from ..retrieval.dropin_init import validated_init
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.served_checks import ServedPoolCheck
from ..retrieval.serving import ServingMixin, ServingOptions, check_pool_count, ordered_by_score, serving_calibration
from .document_selection import select_documents
from .fingerprint import describe_embeddings
from .host import SCORE_KEY, doc_id


def _host_scores(docs: Sequence[Document]) -> np.ndarray:
    missing = [i for i, d in enumerate(docs) if SCORE_KEY not in d.metadata]
    if missing:
        raise ConformalError(
            f"Document {missing[0]} has no metadata['{SCORE_KEY}'] and the compressor has no embeddings: pass "
            "embeddings=... (the compressor then scores documents itself, like EmbeddingsFilter) or use a base "
            "retriever that sets metadata['score']."
        )
    return np.asarray([float(d.metadata[SCORE_KEY]) for d in docs], dtype=float)


def score_documents(query: str, docs: Sequence[Document], embeddings: Embeddings | None) -> np.ndarray:
    """The score the compressor keeps documents by: cosine to the query, or the host's ``metadata['score']``.

    The one function for calibration (:func:`~conformal_rag_plugins.langchain.calibrate_compressor`)
    and query time.

    Examples
    --------
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> docs = [Document(page_content="a"), Document(page_content="b")]
    >>> score_documents("q", docs, DeterministicFakeEmbedding(size=8)).shape
    (2,)
    """
    if not docs:
        return np.zeros(0)
    if embeddings is None:
        return _host_scores(docs)
    return cosine_scores(embeddings.embed_query(query), embeddings.embed_documents([d.page_content for d in docs]))


async def ascore_documents(query: str, docs: Sequence[Document], embeddings: Embeddings | None) -> np.ndarray:
    """Async :func:`score_documents`."""
    if not docs or embeddings is None:
        return score_documents(query, docs, embeddings)
    q = await embeddings.aembed_query(query)
    return cosine_scores(q, await embeddings.aembed_documents([d.page_content for d in docs]))


def compressor_fingerprint(base: Fingerprint, embeddings: Embeddings | None) -> Fingerprint:
    """``base`` (the base retriever's fingerprint) as seen through the compressor's own scoring
    (:func:`~conformal_rag_plugins.retrieval.compression.compressed_fingerprint`)."""
    return compressed_fingerprint(base, None if embeddings is None else describe_embeddings(embeddings))


#: The refusal of a pool with a missing or NaN score.
_NO_SCORE = "A document score is missing or NaN (a zero embedding?): cannot apply the threshold."


class ConformalDocumentCompressor(ServingMixin, BaseDocumentCompressor):
    """Keep the calibrated conformal set of the base retriever's documents (replaces ``EmbeddingsFilter``).

    Use it as ``base_compressor`` of a ``ContextualCompressionRetriever`` whose base retriever returns
    the calibration's pool (``search_kwargs={"k": calibration.pool_size_}``). Like ``EmbeddingsFilter``
    it scores with ``embeddings`` (cosine to the query), else with the base retriever's
    ``metadata['score']``. Calibrated with :func:`~conformal_rag_plugins.langchain.calibrate_compressor`
    on the same base retriever and embeddings, it keeps the gold chunk with probability >=
    ``calibration.confidence_level_``.

    Each call checks the pool: more or fewer documents than the pool (a smaller ``k``, an earlier
    filter) raise :class:`ConformalError`; other embeddings (when built) or a score off the calibrated
    scale raise :class:`FingerprintMismatchError`; ids new to the calibrated collection warn
    :class:`CorpusChangedWarning` once. ``options``: see
    :class:`~conformal_rag_plugins.retrieval.serving.ServingOptions`.

    Examples
    --------
    >>> retriever = ContextualCompressionRetriever(  # doctest: +SKIP
    ...     base_compressor=ConformalDocumentCompressor(calibration=cal, embeddings=embeddings),  # was EmbeddingsFilter
    ...     base_retriever=store.as_retriever(search_kwargs={"k": cal.pool_size_}),
    ... )
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    calibration: RetrievalCalibration
    embeddings: Embeddings | None = None
    options: ServingOptions = Field(default_factory=ServingOptions)
    _served: ServedPoolCheck | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        if data.get("calibration") is not None:
            data["calibration"] = serving_calibration(data["calibration"])
        validated_init(super().__init__, data, "ConformalDocumentCompressor")

    @model_validator(mode="after")
    def _validate(self) -> ConformalDocumentCompressor:
        self.options.check(self.calibration)
        if self.options.check_fingerprint:  # then every call's documents: the scale's range, new chunks
            described = None if self.embeddings is None else describe_embeddings(self.embeddings)
            check_compressor_scoring(self.calibration.fingerprint_, described)
            self._served = ServedPoolCheck(self.calibration, "ConformalDocumentCompressor")
        return self

    def _select(self, docs: list[Document], scores: np.ndarray, query: str) -> list[Document]:
        check_pool_count(
            len(docs),
            self.calibration,
            "documents",
            "the base retriever's k differs. Use base_retriever=store.as_retriever(search_kwargs={{'k': {pool}}}) "
            "or re-calibrate.",
            "either the base retriever's k is smaller than {pool}, or a filter before this compressor already cut "
            "the pool. Use search_kwargs={{'k': {pool}}} and put ConformalDocumentCompressor first in a pipeline.",
        )
        if self._served is not None:
            self._served([doc_id(d) for d in docs], scores[~np.isnan(scores)])  # a NaN is refused below
        docs, ordered = ordered_by_score(docs, scores.tolist(), _NO_SCORE)
        return select_documents(docs, ordered, self.calibration, self.options, checked=True, query=query)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The conformal set of ``documents`` for ``query``, best first."""
        docs = list(documents)
        return self._select(docs, score_documents(query, docs, self.embeddings), query)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async :meth:`compress_documents` (async embeddings)."""
        docs = list(documents)
        return self._select(docs, await ascore_documents(query, docs, self.embeddings), query)
