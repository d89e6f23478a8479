"""Calibrate a LlamaIndex index or retriever: read it with :class:`~.host.LlamaIndexHost`, calibrate once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..datasets.examples import CalibrationExample
from ..retrieval.calibrate_host import calibrate_host
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.host import Parents
from ..retrieval.options import RetrievalOptions, with_level
from .host import LlamaIndexHost


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
        An index (queried with ``as_retriever(similarity_top_k=pool_size)``) or a
        retriever with scores, e.g. ``QueryFusionRetriever`` over vector + BM25.
    examples : sequence of CalibrationExample
        Gold chunks given as node ids or texts, or gold *documents* given by their ids
        (``Document.id_``, the nodes' ``ref_doc_id``, as after ``VectorStoreIndex.from_documents``):
        a split document's gold becomes its chunks that contain a reference answer (every chunk of
        it when none does, or the example has no ``answers``), as
        :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks` does; the rule of
        each example is counted in ``labels_["gold_rule"]``.
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set (or give it in ``options``).
    pool_size : int, optional
        Candidates per query (default 50 for an index, the retriever's
        ``similarity_top_k`` otherwise). Gold outside the pool is a kept miss.
    options : RetrievalOptions, optional
        Score family (default ``"relative"``), PAC, groups, ``chunk_group_key`` (a chunk metadata key:
        a node is kept iff within its own group's threshold), control, progress; see
        :class:`~conformal_rag_plugins.retrieval.options.RetrievalOptions`.
    parents : docstore, StorageContext, mapping, list of nodes or Parents, optional
        Small-to-big: calibrate at the level of the chunks' parents (PARENT/SOURCE relationships,
        or an ``IndexNode``'s ``index_id``), read from this store. An ``AutoMergingRetriever`` host
        brings its storage context's docstore, a ``RecursiveRetriever`` its ``node_dict``. Gold ids
        may be parent, chunk or document ids.
    parent_aggregation : {"max", "sum"}, default "max"
        A parent's score from its chunks' scores (best chunk, or sum of min-max normalised scores).

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> cal = calibrate_retriever(index, examples, confidence_level=0.9)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine(ConformalRetriever(index=index, calibration=cal))  # doctest: +SKIP
    """
    spec = parents if isinstance(parents, Parents) else Parents(parents, parent_aggregation)
    reader = LlamaIndexHost.of(host, pool_size=pool_size, parents=spec)
    return calibrate_host(reader, examples, with_level(options, confidence_level))
