"""LlamaIndex ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.errors import ConformalError
from ..core.selection import check_k_bounds
from ..monitor.monitor import ServedScores
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.fingerprint import check_corpus, corpus_digest
from ..retrieval.groups import check_group_options
from ..retrieval.served_checks import ServedPoolCheck
from .calibrate import resolve_host
from .fingerprint import fingerprint_of
from .host import all_ids
from .node_selection import CONFORMAL_METADATA_KEYS, ordered_nodes, select_nodes, served_dims
from .parent_retrieval import check_level, resolve_parent_level

__all__ = ["CONFORMAL_METADATA_KEYS", "ConformalRetriever"]


class ConformalRetriever(BaseRetriever):
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
    min_k, max_k : int, optional
    group : str, optional
        With a per-group calibration (``calibrate_retriever(..., group_by=...)``): the group
        of every query of this retriever (e.g. one retriever per tenant).
    group_by : callable, optional
        Or a function of the query string giving its group (the one used at calibration;
        functions are not saved). A group too small or unknown at calibration gets the
        calibration's ``group_fallback_`` (every candidate by default); no group, the pooled threshold; the
        nodes say which in ``conformal_group`` and ``conformal_threshold_source``.
    monitor : ConformalMonitor, optional
        Updated with every query's statistic (drift alarm); it must belong to ``calibration``.
    parents : docstore, StorageContext, mapping or list of nodes, optional
        Small-to-big: return copies of the chunks' parents (as in ``calibrate_retriever``), each
        scored from its chunks, with ``metadata["conformal_chunks"]`` (``{"id", "score", "text"}``
        of the chunks that scored it, best first; hidden from the LLM). An ``AutoMergingRetriever``
        or ``RecursiveRetriever`` host brings its own parents.
    parent_aggregation : {"max", "sum"}, default "max"

    Examples
    --------
    >>> retriever = ConformalRetriever(index=index, calibration=cal)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever)  # doctest: +SKIP
    """

    group: str | None = None  # class defaults: set per instance by __init__
    group_by: Any = None
    monitor: Any = None
    parent_level: Any = None
    served_check: Any = None

    def __init__(
        self,
        calibration: RetrievalCalibration | Any,
        *,
        index: Any = None,
        retriever: BaseRetriever | None = None,
        min_k: int | None = None,
        max_k: int | None = None,
        check_fingerprint: bool = True,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        group: str | None = None,
        group_by: Any = None,
        monitor: Any = None,
        parents: Any = None,
        parent_aggregation: str = "max",
    ) -> None:
        if (index is None) == (retriever is None):
            raise ConformalError("Pass exactly one host: index=... or retriever=...")
        check_k_bounds(min_k, max_k)
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        self.calibration = calibration
        check_group_options(calibration, group, group_by)
        self.group, self.group_by = group, group_by
        host = retriever if retriever is not None else index
        self.parent_level = level = resolve_parent_level(host, parents, parent_aggregation)
        self._host, _ = resolve_host(host if level is None else level.retriever, calibration.pool_size_)
        if check_fingerprint:
            check_level(calibration, level)
            fingerprint = fingerprint_of(self._host) if level is None else level.fingerprint(self._host)
            calibration.fingerprint_.check_compatible(fingerprint)
            same = True
            if calibration.corpus_:
                same = check_corpus(calibration.corpus_, corpus_digest(all_ids(self._host)), stacklevel=2)
            # every query's pool too: the scale's range, embedding dimensions, chunks new to the collection
            self.served_check = ServedPoolCheck(calibration, "ConformalRetriever", corpus_warned=not same)
        self.min_k = min_k
        self.max_k = max_k
        self.monitor = monitor
        if monitor is not None:
            monitor.check_calibration(calibration)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _select(self, nodes: list[NodeWithScore], query: str = "") -> list[NodeWithScore]:
        if self.parent_level is not None:
            nodes = self.parent_level.parent_nodes(nodes)
        return select_nodes(
            nodes,
            self.calibration,
            self.min_k,
            self.max_k,
            query=query,
            group=self.group,
            group_by=self.group_by,
            monitor=self.monitor,
        )

    def pool_scores(self, query: str | QueryBundle) -> ServedScores:
        """The scores the monitor sees for ``query``: the host's pool (parents for small-to-big), best first.

        With the unit and the query's group, as :class:`~conformal_rag_plugins.monitor.monitor.ServedScores`.
        Asked for every reference question, it gives
        :meth:`~conformal_rag_plugins.monitor.monitor.ConformalMonitor.from_observations`
        a reference computed exactly like the stream.

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
        return ServedScores.of_query(
            self.calibration, scores, bundle.query_str, group=self.group, group_by=self.group_by, parent_how=how
        )

    def _served(self, nodes: list[NodeWithScore], query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.served_check is not None:
            ids, scores = [n.node.node_id for n in nodes], [n.score for n in nodes]
            self.served_check(ids, [s for s in scores if s is not None], dims=served_dims(nodes, query_bundle))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(self._served(self._host.retrieve(query_bundle), query_bundle), query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes = self._served(await self._host.aretrieve(query_bundle), query_bundle)
        return self._select(nodes, query_bundle.query_str)
