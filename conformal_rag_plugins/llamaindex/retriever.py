"""LlamaIndex ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

import warnings
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..calibration.retrieval import RetrievalCalibration
from ..core.errors import ConformalError, GuaranteeCutWarning
from ..core.retrieval_scores import candidate_nonconformity
from ..core.selection import check_k_bounds, decide_set
from .calibrate import resolve_host
from .fingerprint import fingerprint_of
from .host import pool_from_nodes

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

    Examples
    --------
    >>> retriever = ConformalRetriever(index=index, calibration=cal)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever)  # doctest: +SKIP
    """

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
    ) -> None:
        if (index is None) == (retriever is None):
            raise ConformalError("Pass exactly one host: index=... or retriever=...")
        check_k_bounds(min_k, max_k)
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        self.calibration = calibration
        self._host, _ = resolve_host(retriever if retriever is not None else index, calibration.pool_size_)
        if check_fingerprint:
            calibration.fingerprint_.check_compatible(fingerprint_of(self._host))
        self.min_k = min_k
        self.max_k = max_k
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _select(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        pool, ordered = pool_from_nodes(nodes)
        cal = self.calibration
        decision = decide_set(cal.score_family_, pool.scores, cal.threshold_, min_k=self.min_k, max_k=self.max_k)
        if not decision.guaranteed:
            warnings.warn(decision.reason, GuaranteeCutWarning, stacklevel=4)
        nonconf = candidate_nonconformity(cal.score_family_, pool.scores)
        out = []
        for i in decision.indices:
            node = ordered[i].node.model_copy(deep=False)
            node.metadata = dict(node.metadata) | {
                "conformal_score": float(pool.scores[i]),
                "conformal_nonconformity": float(nonconf[i]),
                "conformal_threshold": cal.threshold_,
                "conformal_alpha": cal.alpha_,
                "conformal_score_family": cal.score_family_,
                "conformal_set_size": decision.conformal_size,
                "conformal_guaranteed": decision.guaranteed,
            }
            for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
                keys = list(getattr(node, attr, []) or [])
                setattr(node, attr, keys + [k for k in CONFORMAL_METADATA_KEYS if k not in keys])
            out.append(NodeWithScore(node=node, score=float(pool.scores[i])))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(self._host.retrieve(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(await self._host.aretrieve(query_bundle))
