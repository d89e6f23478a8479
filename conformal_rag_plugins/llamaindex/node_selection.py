"""One query's conformal set of scored nodes, for both LlamaIndex drop-ins: nodes to best-first
scores and metadata for :func:`~conformal_rag_plugins.retrieval.serving.serve_set`, and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.served_checks import ServedPoolCheck, check_host
from ..retrieval.serving import ServingOptions, ordered_by_score, serve_set
from .fingerprint import fingerprint_of
from .host import all_ids, pool_from_nodes

_EXCLUDED_ATTRS = ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys")


def served_dims(nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> list[int]:
    """The dimensions of the query's embedding (set by a vector retriever) and the nodes'."""
    dims = [len(n.node.embedding) for n in nodes if getattr(n.node, "embedding", None)]
    embedding = getattr(query_bundle, "embedding", None)
    return dims + ([len(embedding)] if embedding else [])


def ordered_nodes(nodes: list[NodeWithScore]) -> tuple[list[NodeWithScore], np.ndarray]:
    """Nodes best first (stable) and their scores; a missing or NaN score raises :func:`pool_from_nodes`'s error."""
    return ordered_by_score(nodes, [n.score for n in nodes], lambda: pool_from_nodes(nodes))


def check_served(check: ServedPoolCheck | None, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> None:
    """Run a drop-in's per-query :class:`ServedPoolCheck` (if any) on the nodes' ids, scores and embeddings."""
    if check is not None:
        scores = [n.score for n in nodes if n.score is not None]
        check([n.node.node_id for n in nodes], scores, dims=served_dims(nodes, query_bundle), stacklevel=5)


def host_check(
    calibration: RetrievalCalibration, host: Any, what: str, fingerprint: Fingerprint | None = None
) -> ServedPoolCheck:
    """:func:`~conformal_rag_plugins.retrieval.served_checks.check_host` of a resolved host, warning at the
    drop-in's ``__init__`` line (``fingerprint``: instead of the host's own).
    """
    fp = fingerprint_of(host) if fingerprint is None else fingerprint
    return check_host(calibration, fp, lambda: all_ids(host), what, stacklevel=2)


def hidden_copy(node: Any, metadata: dict[str, Any], hidden: Sequence[str]) -> Any:
    """A copy of ``node`` with ``metadata``, the ``hidden`` keys excluded from what the LLM and embedder see."""
    update: dict[str, Any] = {"metadata": metadata}
    for attr in _EXCLUDED_ATTRS:
        keys = list(getattr(node, attr, []) or [])
        update[attr] = keys + [k for k in hidden if k not in keys]
    # model_copy(update=...) sets the fields without re-validating each assignment
    return node.model_copy(update=update)


def select_nodes(
    nodes: list[NodeWithScore],
    calibration: RetrievalCalibration,
    options: ServingOptions | None = None,
    *,
    query: str = "",
    stacklevel: int = 5,
) -> list[NodeWithScore]:
    """Keep the nodes inside the calibrated threshold, best first, with the conformal metadata (hidden from the LLM).

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
    # the scores are checked (no NaN) and sorted best first by ordered_nodes: skip re-validating them
    metadata = [n.node.metadata for n in ordered]
    served = serve_set(calibration, scores, metadata, options, query=query, checked=True, stacklevel=stacklevel)
    out = []
    for i, score, meta in served.kept:
        node = ordered[i].node
        metadata = dict(node.metadata) | {"conformal_score": score} | meta
        out.append(NodeWithScore(node=hidden_copy(node, metadata, served.hidden), score=score))
    return out
