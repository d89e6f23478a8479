"""One query's conformal set of scored documents, for both LangChain drop-ins: the kept candidates
of :func:`~conformal_rag_plugins.retrieval.serving.serve_set` as document copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.serving import ServingOptions, serve_set


def select_documents(
    docs: Sequence[Document],
    scores: Any,
    calibration: RetrievalCalibration,
    options: ServingOptions | None = None,
    *,
    query: str = "",
    checked: bool = False,
    stacklevel: int = 5,
) -> list[Document]:
    """Keep the documents inside the calibrated threshold, with ``metadata['score']`` and the conformal metadata.

    ``docs`` and ``scores`` best first (``checked=True``: already NaN-free and sorted).

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> docs = [Document(page_content=t) for t in ("a", "b", "c")]
    >>> [d.page_content for d in select_documents(docs, [0.9, 0.85, 0.5], cal)]
    ['a', 'b']
    """
    metadata = [d.metadata for d in docs]
    served = serve_set(calibration, scores, metadata, options, query=query, checked=checked, stacklevel=stacklevel)
    out = []
    for i, score, meta in served.kept:
        doc = docs[i]
        merged = dict(doc.metadata) | {"score": score} | meta
        out.append(Document(id=doc.id, page_content=doc.page_content, metadata=merged))
    return out
