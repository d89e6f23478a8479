"""The conformal set of one query's scored nodes, as both LlamaIndex drop-ins return it.

The decision is :func:`~conformal_rag_plugins.retrieval.serving.serve_set`; this module turns
nodes into its best-first scores and metadata, and its kept candidates back into node copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.selection import best_first
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.serving import ServingOptions, serve_set
from .host import pool_from_nodes

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
    options: ServingOptions | None = None,
    *,
    query: str = "",
    stacklevel: int = 5,
) -> list[NodeWithScore]:
    """Keep the nodes inside the calibrated threshold, best first, with the conformal metadata.

    The metadata keys (:data:`CONFORMAL_METADATA_KEYS`, and the group keys of a per-group
    calibration) are excluded from what the LLM and the embedding model see. A set cut by
    ``options.max_k`` (or a ``+inf`` threshold) warns with :class:`GuaranteeCutWarning` and says so in
    ``conformal_guaranteed``. With a per-group calibration the query's group (``options.group``, or
    ``options.group_by(query)``) picks the threshold (a pooled fallback is marked not guaranteed); with
    a per-chunk-group calibration (``chunk_group_key_``) every node gets the threshold of its
    own ``metadata[chunk_group_key_]`` (stored in its ``conformal_threshold``); an
    ``options.monitor`` is updated with the query's scores and the group whose threshold it was served
    (:func:`~conformal_rag_plugins.retrieval.serving.serve_set`).

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> from llama_index.core.schema import TextNode
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> nodes = [NodeWithScore(node=TextNode(id_=i, text=i), score=s) for i, s in [("a", 0.5), ("b", 0.9), ("c", 0.85)]]
    >>> [n.node.node_id for n in select_nodes(nodes, cal)]
    ['b', 'c']
    >>> [n.node.node_id for n in select_nodes(nodes, cal, ServingOptions(min_k=3))]
    ['b', 'c', 'a']
    """
    ordered, scores = ordered_nodes(nodes)
    # the scores are checked (no NaN) and sorted best first by ordered_nodes: skip re-validating them
    metadata = [n.node.metadata for n in ordered]
    served = serve_set(calibration, scores, metadata, options, query=query, checked=True, stacklevel=stacklevel)
    out = []
    for i, score, meta in served.kept:
        node = ordered[i].node
        update: dict[str, Any] = {"metadata": dict(node.metadata) | {"conformal_score": score} | meta}
        for attr in _EXCLUDED_ATTRS:
            keys = list(getattr(node, attr, []) or [])
            update[attr] = keys + [k for k in served.hidden if k not in keys]
        # model_copy(update=...) sets the fields without re-validating each assignment
        out.append(NodeWithScore(node=node.model_copy(update=update), score=score))
    return out
