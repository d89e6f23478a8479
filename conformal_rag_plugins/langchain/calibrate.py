"""Calibrate a LangChain vector store or scored retriever through :class:`~.host.LangChainHost`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.conformalizer import calibrate_on_host
from ..retrieval.host import Parents
from ..retrieval.options import RetrievalOptions, with_level
from .host import Host
from .retrieval_host import LangChainHost


def calibrate_retriever(
    host: Host,
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float | None = None,
    pool_size: int | None = None,
    options: RetrievalOptions | None = None,
    parents: Any = None,
    id_key: str | None = None,
    parent_aggregation: str = "max",
) -> RetrievalCalibration:
    """Calibrate the conformal retrieval threshold on labelled examples.

    Parameters
    ----------
    host : VectorStore or BaseRetriever
        A vector store with relevance scores (e.g. ``langchain_chroma.Chroma``) or a retriever that
        puts its score in ``metadata['score']`` (e.g. :class:`ScoredFusionRetriever`), used as they are.
    examples : sequence of CalibrationExample
        Questions with gold texts or gold ids: chunk ids (``Document.id``) or document ids (the
        chunks' ``metadata["doc_id"]``, as ``local.recursive_splitter`` and LangChain's
        ``ParentDocumentRetriever`` set it): with ``answers=`` the document's chunks holding an answer,
        else all of its chunks (docs: Gold ids); counted in ``labels_["gold_rule"]``.
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set (or set it in ``options``).
    pool_size : int, optional
        Candidates per query (default: the host's ``k``, else 50). Gold outside the pool is a
        miss, kept as +inf.
    options : RetrievalOptions, optional
        :class:`~conformal_rag_plugins.retrieval.options.RetrievalOptions`; its ``chunk_group_key`` is
        a document metadata key.
    parents : BaseStore, Mapping or Parents, optional
        Small-to-big: calibrate and return parent documents (parent id -> ``Document``, e.g.
        ``InMemoryStore``) scored from their chunks. A ``MultiVectorRetriever`` /
        ``ParentDocumentRetriever`` brings its ``docstore`` and ``id_key``; its ``vectorstore`` scores
        the chunks. Gold may be parent or chunk ids.
    id_key : str, optional
        Chunk metadata key of the parent id (default: the retriever's ``id_key``, else ``"doc_id"``).
    parent_aggregation : {"max", "sum"}, default "max"
        A parent's score: its best chunk's, or the sum of its chunks' min-max normalised scores.

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> cal = calibrate_retriever(vectorstore, examples, confidence_level=0.9)  # doctest: +SKIP
    """
    spec = parents if isinstance(parents, Parents) else Parents(parents, parent_aggregation, id_key)
    reader = LangChainHost.of(host, pool_size=pool_size, parents=spec)
    return calibrate_on_host(reader, examples, with_level(options, confidence_level))
