"""Calibrate a LlamaIndex index or retriever through :class:`~.host.LlamaIndexHost`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.conformalizer import calibrate_on_host
from ..retrieval.host import Parents
from ..retrieval.options import RetrievalOptions, with_level
from .retrieval_host import LlamaIndexHost


def calibrate_retriever(
    host: Any,
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float | None = None,
    pool_size: int | None = None,
    options: RetrievalOptions | None = None,
    parents: Any = None,
    parent_aggregation: str = "max",
) -> RetrievalCalibration:
    """Calibrate the conformal retrieval threshold by querying the host itself.

    Parameters
    ----------
    host : VectorStoreIndex or BaseRetriever
        An index (queried with ``as_retriever(similarity_top_k=pool_size)``) or a retriever with
        scores, e.g. ``QueryFusionRetriever`` over vector + BM25.
    examples : sequence of CalibrationExample
        Gold as node ids, texts or document ids (``Document.id_``, the nodes' ``ref_doc_id``): a
        split document's gold becomes its chunks that contain a reference answer (all of them when
        none does, or without answers), by the one gold-id rule of
        :func:`~conformal_rag_plugins.labelling.gold_ids.gold_on_chunks` (docs: Gold ids); counted
        in ``labels_["gold_rule"]``.
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set (or set it in ``options``).
    pool_size : int, optional
        Candidates per query (default 50 for an index, else the retriever's ``similarity_top_k``).
        Gold outside the pool is a kept miss.
    options : RetrievalOptions, optional
        :class:`~conformal_rag_plugins.retrieval.options.RetrievalOptions`; its ``chunk_group_key`` is
        a node metadata key.
    parents : docstore, StorageContext, mapping, list of nodes or Parents, optional
        Small-to-big: calibrate on the chunks' parents (PARENT/SOURCE relationships, or an
        ``IndexNode``'s ``index_id``) read from this store. An ``AutoMergingRetriever`` brings its
        docstore, a ``RecursiveRetriever`` its ``node_dict``. Gold may be parent, chunk or document ids.
    parent_aggregation : {"max", "sum"}, default "max"
        A parent's score: its best chunk's, or the sum of its chunks' min-max normalised scores.

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> cal = calibrate_retriever(index, examples, confidence_level=0.9)  # doctest: +SKIP
    """
    spec = parents if isinstance(parents, Parents) else Parents(parents, parent_aggregation)
    reader = LlamaIndexHost.of(host, pool_size=pool_size, parents=spec)
    return calibrate_on_host(reader, examples, with_level(options, confidence_level))
