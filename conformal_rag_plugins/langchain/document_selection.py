"""The conformal set of one query's scored documents, as both LangChain drop-ins return it.

The decision is :func:`~conformal_rag_plugins.retrieval.serving.serve_set`; this module turns
its kept candidates back into document copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.documents import Document
from pydantic import ValidationError

from ..core.errors import ConformalError
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.serving import ServingOptions, refuse_loose_options, serve_set


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

    ``docs`` and ``scores`` are best first (``checked=True``: already known NaN-free and sorted);
    the decision (groups, ``min_k``/``max_k``, warning, monitor) is
    :func:`~conformal_rag_plugins.retrieval.serving.serve_set`.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> docs = [Document(page_content=t) for t in ("a", "b", "c")]
    >>> [d.page_content for d in select_documents(docs, [0.9, 0.85, 0.5], cal)]
    ['a', 'b']
    >>> [d.page_content for d in select_documents(docs, [0.9, 0.85, 0.5], cal, ServingOptions(min_k=3))]
    ['a', 'b', 'c']
    """
    metadata = [d.metadata for d in docs]
    served = serve_set(calibration, scores, metadata, options, query=query, checked=checked, stacklevel=stacklevel)
    out = []
    for i, score, meta in served.kept:
        doc = docs[i]
        merged = dict(doc.metadata) | {"score": score} | meta
        out.append(Document(id=doc.id, page_content=doc.page_content, metadata=merged))
    return out


def validated_init(init: Callable[..., None], data: dict[str, Any], what: str) -> None:
    """Build a pydantic drop-in: refuse loose :class:`ServingOptions` keywords, surface a validator's ConformalError."""
    refuse_loose_options(data, what)
    try:
        init(**data)
    except ValidationError as exc:
        raise_conformal_cause(exc)
        raise


def raise_conformal_cause(exc: ValidationError) -> None:
    """Raise the :class:`ConformalError` a drop-in's validator raised inside pydantic's ``ValidationError``.

    Pydantic wraps a ``ValueError`` raised by a validator; the drop-ins surface theirs
    (``FingerprintMismatchError``, crossed ``min_k``/``max_k``, the host count) unwrapped, as the
    LlamaIndex adapter raises them. Returns when the error is pydantic's own (the caller re-raises it).

    Examples
    --------
    >>> from pydantic import BaseModel, field_validator
    >>> class Knob(BaseModel):
    ...     k: int
    ...     @field_validator("k")
    ...     @classmethod
    ...     def _positive(cls, k):
    ...         if k < 1:
    ...             raise ConformalError("k must be >= 1")
    ...         return k
    >>> try:
    ...     Knob(k=0)
    ... except ValidationError as exc:
    ...     raise_conformal_cause(exc)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: k must be >= 1
    """
    for err in exc.errors():
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ConformalError):
            raise cause from None
