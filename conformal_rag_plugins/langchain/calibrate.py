"""Calibrate a LangChain vector store or scored retriever: read it with :class:`~.host.LangChainHost`, calibrate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..datasets.examples import CalibrationExample
from ..retrieval.calibrate_host import calibrate_host
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.host import Parents
from ..retrieval.options import RetrievalOptions, with_level
from .host import Host, LangChainHost


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
        A vector store with relevance scores (e.g. ``langchain_chroma.Chroma``) or a
        retriever that puts its score in ``metadata['score']`` (e.g.
        :class:`ScoredFusionRetriever`). Its scores are used as they are.
    examples : sequence of CalibrationExample
        Questions with gold chunk ids (``Document.id``) or texts.
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set (or give it in ``options``).
    pool_size : int, optional
        Candidates per query (default: the host's ``k``, else 50). A gold chunk
        outside the pool is a miss, kept as +inf.
    options : RetrievalOptions, optional
        Score family (default ``"relative"``), PAC, groups, ``chunk_group_key`` (a document metadata key:
        a document is kept iff within its own group's threshold), control, progress; see
        :class:`~conformal_rag_plugins.retrieval.options.RetrievalOptions`.
    parents : BaseStore, Mapping or Parents, optional
        Small-to-big: calibrate and return *parent* documents scored from their chunks. Parent id
        -> parent ``Document`` (e.g. ``InMemoryStore``). A ``MultiVectorRetriever`` /
        ``ParentDocumentRetriever`` host brings its own ``docstore`` and ``id_key``; its
        ``vectorstore`` scores the chunks. Gold ids may be parent ids or chunk ids.
    id_key : str, optional
        Chunk metadata key of the parent id (default: the retriever's ``id_key``, else ``"doc_id"``).
    parent_aggregation : {"max", "sum"}, default "max"
        A parent's score from its chunks in the pool (the best one, or the sum of min-max normalised scores).

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> cal = calibrate_retriever(vectorstore, examples, confidence_level=0.9)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(vectorstore=vectorstore, calibration=cal)  # doctest: +SKIP
    """
    spec = parents if isinstance(parents, Parents) else Parents(parents, parent_aggregation, id_key)
    reader = LangChainHost.of(host, pool_size=pool_size, parents=spec)
    return calibrate_host(reader, examples, with_level(options, confidence_level))
