"""LlamaIndex ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.errors import ConformalError
from ..monitor.monitor import ServedScores
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.served_checks import ServedPoolCheck, check_host
from ..retrieval.serving import DEFAULT_OPTIONS, ServingMixin, ServingOptions, serving_calibration
from .fingerprint import fingerprint_of
from .host import all_ids, resolve_host
from .node_selection import check_served, ordered_nodes, select_nodes
from .parent_retrieval import ParentLevel, check_level, resolve_parent_level


class ConformalRetriever(ServingMixin, BaseRetriever):
    """Return every node whose score passes the calibrated threshold.

    The gold chunk is in the result with probability >= ``calibration.confidence_level_``,
    unless ``max_k`` cuts the set (then the nodes say so and a warning is raised).

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
        From :func:`calibrate_retriever` on the same host (checked by fingerprint); an
        end-to-end calibration uses its retrieval stage's threshold.
    index : VectorStoreIndex, optional
    retriever : BaseRetriever, optional
        The host (e.g. a ``QueryFusionRetriever``); pass ``index`` or ``retriever``.
    options : ServingOptions, optional
        ``min_k``/``max_k``, the query's ``group`` or ``group_by``, a drift ``monitor``
        (``retriever.monitor = ...`` attaches one later) and ``check_fingerprint``: see
        :class:`~conformal_rag_plugins.retrieval.serving.ServingOptions`.
    parents : docstore, StorageContext, mapping or list of nodes, optional
        Small-to-big: return copies of the chunks' parents (as in ``calibrate_retriever``), each
        scored from its chunks, with ``metadata["conformal_chunks"]`` (``{"id", "score", "text"}``
        of the chunks that scored it, best first; hidden from the LLM). An ``AutoMergingRetriever``
        or ``RecursiveRetriever`` host brings its own parents.
    parent_aggregation : {"max", "sum"}, default "max"

    Examples
    --------
    >>> retriever = ConformalRetriever(index=index, calibration=cal)  # doctest: +SKIP
    >>> capped = ConformalRetriever(index=index, calibration=cal, options=ServingOptions(max_k=5))  # doctest: +SKIP
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
            fingerprint = fingerprint_of(self._host) if level is None else level.fingerprint(self._host)
            # every query's pool too: the scale's range, embedding dimensions, chunks new to the collection
            self.served_check = check_host(
                calibration, fingerprint, lambda: all_ids(self._host), "ConformalRetriever", stacklevel=1
            )
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _select(self, nodes: list[NodeWithScore], query: str = "") -> list[NodeWithScore]:
        if self.parent_level is not None:
            nodes = self.parent_level.parent_nodes(nodes)
        return select_nodes(nodes, self.calibration, self.options, query=query)

    def pool_scores(self, query: str | QueryBundle) -> ServedScores:
        """The host's pool scores for ``query`` (parents for small-to-big), best first, as the monitor sees them.

        A :class:`~conformal_rag_plugins.monitor.monitor.ServedScores` (with the unit and the query's group):
        the reference of :meth:`~conformal_rag_plugins.monitor.monitor.ConformalMonitor.from_observations`.

        Examples
        --------
        >>> pools = [retriever.pool_scores(q) for q in questions]  # doctest: +SKIP
        >>> monitor = ConformalMonitor.from_observations(cal, pools, statistic="set_size")  # doctest: +SKIP
        """
        bundle = query if isinstance(query, QueryBundle) else QueryBundle(query_str=query)
        nodes = self._host.retrieve(bundle)
        if self.parent_level is not None:
            nodes = self.parent_level.parent_nodes(nodes)
        _, scores = ordered_nodes(nodes)
        how = None if self.parent_level is None else self.parent_level.how
        group, group_by = self.options.group, self.options.group_by
        return ServedScores.of_query(
            self.calibration, scores, bundle.query_str, group=group, group_by=group_by, parent_how=how
        )

    def _served(self, nodes: list[NodeWithScore], query_bundle: QueryBundle) -> list[NodeWithScore]:
        check_served(self.served_check, nodes, query_bundle)
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(self._served(self._host.retrieve(query_bundle), query_bundle), query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes = self._served(await self._host.aretrieve(query_bundle), query_bundle)
        return self._select(nodes, query_bundle.query_str)
