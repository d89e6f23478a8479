"""The conformal set of one query's scored nodes, as both LlamaIndex drop-ins return it."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.errors import GuaranteeCutWarning
from ..core.selection import best_first, check_k_bounds, conformal_metadata, decide_set
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.groups import GROUP_METADATA_KEYS, chunk_set, mark_group_fallback, query_threshold
from .host import pool_from_nodes

__all__ = ["CONFORMAL_METADATA_KEYS", "ordered_nodes", "select_nodes", "served_dims"]

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


def served_dims(nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> list[int]:
    """The dimensions of the embeddings a query carries: the query's (set by a vector retriever) and the nodes'."""
    dims = [len(n.node.embedding) for n in nodes if getattr(n.node, "embedding", None)]
    embedding = getattr(query_bundle, "embedding", None)
    return dims + ([len(embedding)] if embedding else [])


def ordered_nodes(nodes: list[NodeWithScore]) -> tuple[list[NodeWithScore], np.ndarray]:
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


def select_nodes(
    nodes: list[NodeWithScore],
    calibration: RetrievalCalibration,
    min_k: int | None = None,
    max_k: int | None = None,
    *,
    query: str = "",
    group: Any = None,
    group_by: Any = None,
    monitor: Any = None,
    stacklevel: int = 5,
) -> list[NodeWithScore]:
    """Keep the nodes inside the calibrated threshold, best first, with the conformal metadata.

    The metadata keys (:data:`CONFORMAL_METADATA_KEYS`, and the group keys of a per-group
    calibration) are excluded from what the LLM and the embedding model see. A set cut by
    ``max_k`` (or a ``+inf`` threshold) warns with :class:`GuaranteeCutWarning` and says so in
    ``conformal_guaranteed``. With a per-group calibration the query's group (``group``, or
    ``group_by(query)``) picks the threshold (a pooled fallback is marked not guaranteed); with
    a per-chunk-group calibration (``chunk_group_key_``) every node gets the threshold of its
    own ``metadata[chunk_group_key_]`` (stored in its ``conformal_threshold``); a
    ``monitor`` is updated with the query's scores and the group whose threshold it was served.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> from llama_index.core.schema import TextNode
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> nodes = [NodeWithScore(node=TextNode(id_=i, text=i), score=s) for i, s in [("a", 0.5), ("b", 0.9), ("c", 0.85)]]
    >>> [n.node.node_id for n in select_nodes(nodes, cal)]
    ['b', 'c']
    """
    ordered, scores = ordered_nodes(nodes)
    family = calibration.score_family_
    check_k_bounds(min_k, max_k)
    per_chunk: list[dict[str, Any]] | None = None
    thresholds = None
    if getattr(calibration, "chunk_group_key_", None):
        key = calibration.chunk_group_key_
        decision, thresholds, per_chunk = chunk_set(
            calibration, scores, [n.node.metadata.get(key) for n in ordered], min_k=min_k, max_k=max_k
        )
        threshold, group_meta = calibration.threshold_, dict.fromkeys(GROUP_METADATA_KEYS)  # keys to hide
    else:
        threshold, group_meta = query_threshold(calibration, group, group_by, query)
        # the scores are checked (no NaN) and sorted best first by ordered_nodes: skip re-validating them
        decision = mark_group_fallback(
            decide_set(family, scores, threshold, min_k=min_k, max_k=max_k, validate=False), group_meta
        )
    if not decision.guaranteed:
        warnings.warn(decision.reason, GuaranteeCutWarning, stacklevel=stacklevel)
    if monitor is not None:
        # the group whose threshold was served: the monitor's reference used the same rule
        monitor.observe(
            scores, set_size=decision.conformal_size, calibration=calibration, group=group_meta.get("conformal_group")
        )
    hidden = (*CONFORMAL_METADATA_KEYS, *group_meta)
    out = []
    shared = conformal_metadata(
        family, threshold, calibration.alpha_, scores, decision, None if thresholds is None else np.array(thresholds)
    )
    for i, score, meta in shared:
        node = ordered[i].node
        own = group_meta if per_chunk is None else per_chunk[i]
        update: dict[str, Any] = {"metadata": dict(node.metadata) | {"conformal_score": score} | meta | own}
        for attr in _EXCLUDED_ATTRS:
            keys = list(getattr(node, attr, []) or [])
            update[attr] = keys + [k for k in hidden if k not in keys]
        # model_copy(update=...) sets the fields without re-validating each assignment
        out.append(NodeWithScore(node=node.model_copy(update=update), score=score))
    return out
