"""LlamaIndex ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.errors import ConformalError
from ..monitor.monitor import ServedScores
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.served_checks import ServedPoolCheck
from ..retrieval.serving import DEFAULT_OPTIONS, ServingMixin, ServingOptions, serving_calibration
from .host import resolve_host
from .node_selection import check_served, host_check, ordered_nodes, select_nodes
from .parent_retrieval import ParentLevel, check_level, resolve_parent_level


class ConformalRetriever(ServingMixin, BaseRetriever):
    """Return every node whose score passes the calibrated threshold.

    The gold chunk is in the result with probability >= ``calibration.confidence_level_``, unless
    ``options.max_k`` cuts the set (the nodes then say so and a warning is raised).

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
        From :func:`calibrate_retriever` on the same host (checked by fingerprint); an end-to-end
        calibration serves its retrieval stage.
    index, retriever : VectorStoreIndex or BaseRetriever
        The host (e.g. a ``QueryFusionRetriever``): pass exactly one.
    options : ServingOptions, optional
        See :class:`~conformal_rag_plugins.retrieval.serving.ServingOptions`
        (``retriever.monitor = ...`` attaches a monitor later).
    parents : docstore, StorageContext, mapping or list of nodes, optional
        Small-to-big: return copies of the chunks' parents, scored from their chunks, with
        ``metadata["conformal_chunks"]`` (``{"id", "score", "text"}`` of those chunks, best first;
        hidden from the LLM). An ``AutoMergingRetriever`` or ``RecursiveRetriever`` host brings its own.
    parent_aggregation : {"max", "sum"}, default "max"

    Examples
    --------
    >>> retriever = ConformalRetriever(index=index, calibration=cal)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever)  # doctest: +SKIP
    """

    options: ServingOptions = DEFAULT_OPTIONS  # class defaults: set per instance by __init__
    parent_level: ParentLevel | None = None
    served_check: ServedPoolCheck | None = None

    def __init__(
        self,
        calibration: RetrievalCalibration | Any,
        *,
        index: Any = None,
        retriever: BaseRetriever | None = None,
        options: ServingOptions | None = None,
        parents: Any = None,
        parent_aggregation: str = "max",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if (index is None) == (retriever is None):
            raise ConformalError("Pass exactly one host: index=... or retriever=...")
        self.calibration = calibration = serving_calibration(calibration)
        self.options = options = options or DEFAULT_OPTIONS
        options.check(calibration)
        host = retriever if retriever is not None else index
        self.parent_level = level = resolve_parent_level(host, parents, parent_aggregation)
        self._host, _ = resolve_host(host if level is None else level.retriever, calibration.pool_size_)
        if options.check_fingerprint:
            check_level(calibration, level)
            fingerprint = None if level is None else level.fingerprint(self._host)
            # every query's pool too: the scale's range, embedding dimensions, chunks new to the collection
            self.served_check = host_check(calibration, self._host, "ConformalRetriever", fingerprint)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _parents(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        """The chunks' parents for small-to-big, else the nodes."""
        return nodes if self.parent_level is None else self.parent_level.parent_nodes(nodes)

    def _select(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        """Check the host's pool, then serve its conformal set."""
        check_served(self.served_check, nodes, query_bundle)
        query = "" if query_bundle is None else query_bundle.query_str
        return select_nodes(self._parents(nodes), self.calibration, self.options, query=query)

    def pool_scores(self, query: str | QueryBundle) -> ServedScores:
        """The host's pool scores for ``query`` (parents for small-to-big), best first, as the monitor sees them.

        The reference of :meth:`~conformal_rag_plugins.monitor.monitor.ConformalMonitor.from_observations`.

        Examples
        --------
        >>> pools = [retriever.pool_scores(q) for q in questions]  # doctest: +SKIP
        >>> monitor = ConformalMonitor.from_observations(cal, pools, statistic="set_size")  # doctest: +SKIP
        """
        bundle = query if isinstance(query, QueryBundle) else QueryBundle(query_str=query)
        _, scores = ordered_nodes(self._parents(self._host.retrieve(bundle)))
        return ServedScores.of_drop_in(self, scores, bundle.query_str, self.parent_level)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(self._host.retrieve(query_bundle), query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(await self._host.aretrieve(query_bundle), query_bundle)
