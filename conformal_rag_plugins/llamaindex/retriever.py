"""LlamaIndex ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..calibration.fingerprint import check_corpus, corpus_digest
from ..calibration.groups import check_group_options, query_threshold
from ..calibration.retrieval import RetrievalCalibration
from ..core.errors import ConformalError, GuaranteeCutWarning
from ..core.selection import best_first, check_k_bounds, conformal_metadata, decide_set
from .calibrate import resolve_host
from .fingerprint import fingerprint_of
from .host import all_ids, pool_from_nodes

__all__ = ["CONFORMAL_METADATA_KEYS", "ConformalRetriever"]

CONFORMAL_METADATA_KEYS = (
    "conformal_score",
    "conformal_nonconformity",
    "conformal_threshold",
    "conformal_alpha",
    "conformal_score_family",
    "conformal_set_size",
    "conformal_guaranteed",
)


_EXCLUDED_ATTRS = ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys")


def _ordered(nodes: list[NodeWithScore]) -> tuple[list[NodeWithScore], np.ndarray]:
    """Nodes best first (stable) and their scores, as :func:`pool_from_nodes` orders them.

    Only the scores are read: the texts a :class:`CandidatePool` carries are for calibration.
    Missing or NaN scores go through :func:`pool_from_nodes` for its error.
    """
    got = best_first([n.score for n in nodes])
    if got is None:
        pool_from_nodes(nodes)  # raises the CalibrationError naming the missing or NaN score
        raise AssertionError("unreachable")
    scores, order = got
    return (list(nodes) if order is None else [nodes[i] for i in order]), scores


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
        functions are not saved). An unknown group, or none, uses the pooled threshold; the
        nodes say which in ``conformal_group`` and ``conformal_threshold_source``.
    monitor : ConformalMonitor, optional
        Updated with every query's statistic (drift alarm); it must belong to ``calibration``.

    Examples
    --------
    >>> retriever = ConformalRetriever(index=index, calibration=cal)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever)  # doctest: +SKIP
    """

    group: str | None = None  # class defaults: set per instance by __init__
    group_by: Any = None

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
    ) -> None:
        if (index is None) == (retriever is None):
            raise ConformalError("Pass exactly one host: index=... or retriever=...")
        check_k_bounds(min_k, max_k)
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        self.calibration = calibration
        check_group_options(calibration, group, group_by)
        self.group, self.group_by = group, group_by
        self._host, _ = resolve_host(retriever if retriever is not None else index, calibration.pool_size_)
        if check_fingerprint:
            calibration.fingerprint_.check_compatible(fingerprint_of(self._host))
            if calibration.corpus_:
                check_corpus(calibration.corpus_, corpus_digest(all_ids(self._host)), stacklevel=2)
        self.min_k = min_k
        self.max_k = max_k
        self.monitor = monitor
        if monitor is not None:
            monitor.check_calibration(calibration)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _select(self, nodes: list[NodeWithScore], query: str = "") -> list[NodeWithScore]:
        ordered, scores = _ordered(nodes)
        cal = self.calibration
        family = cal.score_family_
        check_k_bounds(self.min_k, self.max_k)
        threshold, group_meta = query_threshold(cal, self.group, self.group_by, query)
        # the scores are checked (no NaN) and sorted best first by _ordered: skip re-validating them
        decision = decide_set(family, scores, threshold, min_k=self.min_k, max_k=self.max_k, validate=False)
        if not decision.guaranteed:
            warnings.warn(decision.reason, GuaranteeCutWarning, stacklevel=4)
        if self.monitor is not None:
            self.monitor.observe(scores, set_size=decision.conformal_size, calibration=cal)
        out = []
        for i, score, meta in conformal_metadata(family, threshold, cal.alpha_, scores, decision):
            node = ordered[i].node
            update: dict[str, Any] = {"metadata": dict(node.metadata) | {"conformal_score": score} | meta | group_meta}
            for attr in _EXCLUDED_ATTRS:
                keys = list(getattr(node, attr, []) or [])
                update[attr] = keys + [k for k in (*CONFORMAL_METADATA_KEYS, *group_meta) if k not in keys]
            # model_copy(update=...) sets the fields without re-validating each assignment
            out.append(NodeWithScore(node=node.model_copy(update=update), score=score))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(self._host.retrieve(query_bundle), query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(await self._host.aretrieve(query_bundle), query_bundle.query_str)
