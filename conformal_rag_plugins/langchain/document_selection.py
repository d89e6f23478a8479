"""The conformal set of one query's scored documents, as both LangChain drop-ins return it."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from ..core.errors import GuaranteeCutWarning
from ..core.selection import check_k_bounds, conformal_metadata, decide_set
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.groups import chunk_set, mark_group_fallback, query_threshold

__all__ = ["select_documents"]


def select_documents(
    docs: Sequence[Document],
    scores: Any,
    calibration: RetrievalCalibration,
    min_k: int | None = None,
    max_k: int | None = None,
    *,
    checked: bool = False,
    query: str = "",
    group: Any = None,
    group_by: Any = None,
    monitor: Any = None,
    stacklevel: int = 5,
) -> list[Document]:
    """Keep the documents inside the calibrated threshold, with ``metadata['score']`` and the conformal metadata.

    ``docs`` and ``scores`` are best first; ``checked=True`` when the scores are already known
    NaN-free and sorted. A set cut by ``max_k`` (or a ``+inf`` threshold) warns with
    :class:`GuaranteeCutWarning` and says so in ``conformal_guaranteed``. With a per-group
    calibration the query's group (``group``, or ``group_by(query)``) picks the threshold (a
    pooled fallback is marked not guaranteed); with a per-chunk-group calibration
    (``chunk_group_key_``) every document gets the threshold of its own
    ``metadata[chunk_group_key_]`` (stored in its ``conformal_threshold``); a
    ``monitor`` is updated with the query's scores and the group whose threshold it was served.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> docs = [Document(page_content=t) for t in ("a", "b", "c")]
    >>> [d.page_content for d in select_documents(docs, [0.9, 0.85, 0.5], cal)]
    ['a', 'b']
    """
    family = calibration.score_family_
    check_k_bounds(min_k, max_k)
    arr = np.asarray(scores, dtype=float)
    per_chunk: list[dict[str, Any]] | None = None
    thresholds = None
    if getattr(calibration, "chunk_group_key_", None):
        key = calibration.chunk_group_key_
        decision, thresholds, per_chunk = chunk_set(
            calibration, arr, [d.metadata.get(key) for d in docs], min_k=min_k, max_k=max_k, validate=not checked
        )
        threshold, group_meta = calibration.threshold_, {}
    else:
        threshold, group_meta = query_threshold(calibration, group, group_by, query)
        decision = mark_group_fallback(
            decide_set(family, arr, threshold, min_k=min_k, max_k=max_k, validate=not checked), group_meta
        )
    if not decision.guaranteed:
        warnings.warn(decision.reason, GuaranteeCutWarning, stacklevel=stacklevel)
    if monitor is not None:
        # the group whose threshold was served: the monitor's reference used the same rule
        monitor.observe(
            arr, set_size=decision.conformal_size, calibration=calibration, group=group_meta.get("conformal_group")
        )
    out = []
    shared = conformal_metadata(
        family, threshold, calibration.alpha_, arr, decision, None if thresholds is None else np.array(thresholds)
    )
    for i, score, meta in shared:
        doc = docs[i]
        metadata = dict(doc.metadata) | {"score": score} | meta | (group_meta if per_chunk is None else per_chunk[i])
        out.append(Document(id=doc.id, page_content=doc.page_content, metadata=metadata))
    return out
