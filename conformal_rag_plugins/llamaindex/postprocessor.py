"""LlamaIndex ``BaseNodePostprocessor``: the calibrated replacement for ``SimilarityPostprocessor``."""

from __future__ import annotations

from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import Field, PrivateAttr

from ..core.errors import ConformalError, FingerprintMismatchError
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.served_checks import ServedPoolCheck
from ..retrieval.serving import (
    ServingMixin,
    ServingOptions,
    check_pool_count,
    check_scored,
    refuse_loose_options,
    serving_calibration,
)
from .host import resolve_host
from .node_selection import check_served, host_check, select_nodes

_NO_SCORE = (
    "Node {id!r} has no score ({score!r}): ConformalNodePostprocessor needs the retriever's scores. Put it before "
    "postprocessors that drop or replace scores."
)


class ConformalNodePostprocessor(ServingMixin, BaseNodePostprocessor):
    """Keep the calibrated conformal set of the retriever's scored nodes (replaces ``SimilarityPostprocessor``).

    Put it first in ``node_postprocessors`` of a query engine whose retriever returns the
    calibration's pool (``similarity_top_k == calibration.pool_size_``), calibrated with
    :func:`~conformal_rag_plugins.llamaindex.calibrate_retriever` on the same index or retriever:
    the gold chunk is then kept with probability >= ``calibration.confidence_level_``.

    Every query's pool is checked: more or fewer nodes than the pool (a smaller ``similarity_top_k``,
    an earlier postprocessor) or a node without a score raise :class:`ConformalError`; a score off
    the calibrated scale, an embedding of another dimension, or ``Settings.embed_model`` set to
    another model raise :class:`FingerprintMismatchError`; node ids new to the calibrated collection
    warn :class:`CorpusChangedWarning` once.

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
    index, retriever : optional
        The host, to check the fingerprint and collection (and a retriever's top-k) when built.
    options : ServingOptions, optional
        See :class:`~conformal_rag_plugins.retrieval.serving.ServingOptions`.

    Examples
    --------
    >>> engine = index.as_query_engine(  # doctest: +SKIP
    ...     similarity_top_k=cal.pool_size_,
    ...     node_postprocessors=[ConformalNodePostprocessor(calibration=cal)],  # was SimilarityPostprocessor(...)
    ... )
    """

    calibration: Any = Field(description="RetrievalCalibration (or an end-to-end calibration's retrieval stage).")
    options: ServingOptions = Field(default_factory=ServingOptions, exclude=True)
    _served: ServedPoolCheck | None = PrivateAttr(default=None)

    def __init__(
        self,
        calibration: RetrievalCalibration | Any,
        *,
        index: Any = None,
        retriever: Any = None,
        options: ServingOptions | None = None,
        **kwargs: Any,
    ) -> None:
        refuse_loose_options(kwargs, "ConformalNodePostprocessor")
        calibration = serving_calibration(calibration)
        if not isinstance(calibration, RetrievalCalibration):
            raise ConformalError(f"Expected a RetrievalCalibration, got {type(calibration).__name__}.")
        options = options or ServingOptions()
        options.check(calibration)
        super().__init__(calibration=calibration, options=options, **kwargs)
        if index is not None and retriever is not None:
            raise ConformalError("Pass at most one host to check: index=... or retriever=...")
        host = retriever if retriever is not None else index
        if host is not None:
            checked, _ = resolve_host(host, calibration.pool_size_)
            if options.check_fingerprint:
                self._served = host_check(calibration, checked, "ConformalNodePostprocessor")
        elif options.check_fingerprint:
            _check_settings_model(calibration)
            self._served = ServedPoolCheck(calibration, "ConformalNodePostprocessor")

    @classmethod
    def class_name(cls) -> str:
        return "ConformalNodePostprocessor"

    def _check_pool(self, nodes: list[NodeWithScore]) -> None:
        """Refuse a node without a score, and a pool larger or smaller than the calibrated one."""
        check_scored([n.node.node_id for n in nodes], [n.score for n in nodes], _NO_SCORE)
        check_pool_count(
            len(nodes),
            self.calibration,
            "nodes",
            "the retriever's top-k differs from the calibration. Query with similarity_top_k={pool} "
            "(index.as_query_engine(similarity_top_k={pool}, ...)) or re-calibrate with pool_size={n}.",
            "either the retriever's similarity_top_k is smaller than {pool}, or an earlier node postprocessor "
            "already cut the pool (a SimilarityPostprocessor, keyword or date filter placed before this one). Query "
            "with similarity_top_k={pool} and put ConformalNodePostprocessor first in node_postprocessors; the "
            "coverage guarantee holds only for the whole calibrated pool.",
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        nodes = list(nodes)
        self._check_pool(nodes)
        check_served(self._served, nodes, query_bundle)
        query = query_bundle.query_str if query_bundle is not None else ""
        return select_nodes(nodes, self.calibration, self.options, query=query)


def _check_settings_model(calibration: RetrievalCalibration) -> None:
    """Refuse ``Settings.embed_model`` set to another model than the calibrated one."""
    from llama_index.core import Settings

    model = getattr(Settings, "_embed_model", None)  # the private field: reading the property resolves a default
    expected = calibration.fingerprint_.embedding_model
    if model is None or expected in ("none", "unknown"):
        return
    name = str(getattr(model, "model_name", None) or type(model).__name__)
    if name not in ("unknown", expected):
        raise FingerprintMismatchError(
            f"Settings.embed_model is {name!r} but this calibration was made with {expected!r}: the index the "
            "query engine searches embeds with another model, so the threshold does not transfer. Re-calibrate with "
            "this model, or, if the queried index has its own embed_model, pass index=... so that it is checked "
            "instead of Settings."
        )
