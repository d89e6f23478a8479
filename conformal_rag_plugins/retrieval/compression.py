"""What a document compressor adds to its base retriever: pool size, score scale, cosine scores, fingerprint.

Framework-free: the LangChain ``ConformalDocumentCompressor`` and its calibration read the
embeddings and documents; the checks, the arithmetic and the fingerprint rule live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..core.errors import ConformalError, FingerprintMismatchError
from .fingerprint import Fingerprint
from .host import agreed_pool_size

#: The score scale of documents the compressor scores itself (as ``EmbeddingsFilter`` does).
COMPRESSOR_SCALE = "cosine(embed_query, embed_documents)"


def cosine_scores(query: Sequence[float], docs: Sequence[Sequence[float]]) -> np.ndarray:
    """Cosine of each document vector to the query vector; ``NaN`` for a zero vector.

    >>> cosine_scores([1.0, 0.0], [[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]]).tolist()
    [1.0, 0.0, nan]
    """
    q = np.asarray(query, dtype=float)
    d = np.asarray(docs, dtype=float).reshape(len(docs), -1)
    norms = np.linalg.norm(d, axis=1) * np.linalg.norm(q)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (d @ q) / np.where(norms == 0, np.nan, norms)


def compressed_fingerprint(base: Fingerprint, embeddings: tuple[str, int | None] | None) -> Fingerprint:
    """``base`` (the base retriever's fingerprint) seen through a compressor scoring with ``(model, dim)``.

    >>> base = Fingerprint("langchain", "Chroma", "cosine", "m", 4, "1-distance")
    >>> compressed_fingerprint(base, None).retriever
    'compression:dense'
    >>> compressed_fingerprint(base, ("minilm", 384)).score_scale
    'cosine(embed_query, embed_documents)'
    """
    base = replace(base, retriever=f"compression:{base.retriever.removeprefix('compression:')}")
    if embeddings is None:
        return base
    name, dim = embeddings
    return replace(base, embedding_model=name, embedding_dim=dim, score_scale=COMPRESSOR_SCALE)


def check_compressor_scoring(calibrated: Fingerprint, embeddings: tuple[str, int | None] | None) -> None:
    """Refuse a compressor scoring otherwise than its calibration: other ``(model, dim)`` embeddings, or none
    where the calibration scored with embeddings.

    >>> base = Fingerprint("langchain", "Chroma", "cosine", "m", 4, "1-distance")
    >>> check_compressor_scoring(base, None)
    >>> check_compressor_scoring(compressed_fingerprint(base, ("minilm", 384)), None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.FingerprintMismatchError: This calibration scored documents with embeddings ...
    """
    if embeddings is not None:
        calibrated.check_compatible(compressed_fingerprint(calibrated, embeddings))
    elif calibrated.score_scale == COMPRESSOR_SCALE:
        raise FingerprintMismatchError(
            "This calibration scored documents with embeddings (as EmbeddingsFilter does); pass the same "
            "embeddings=... to the compressor, or re-calibrate on the base retriever's own scores."
        )


def base_retriever_k(base_retriever: object) -> int | None:
    """How many documents the base retriever returns (``search_kwargs['k']`` or ``k``), if it says.

    >>> from types import SimpleNamespace
    >>> base_retriever_k(SimpleNamespace(search_kwargs={"k": 50}))
    50
    """
    kwargs = getattr(base_retriever, "search_kwargs", None)
    if isinstance(kwargs, dict) and isinstance(kwargs.get("k"), int):
        return int(kwargs["k"])
    k = getattr(base_retriever, "k", None)
    if isinstance(k, int):
        return k
    if isinstance(kwargs, dict) and hasattr(base_retriever, "vectorstore"):
        return 4  # VectorStoreRetriever's default k
    return None


def base_pool_size(base_retriever: object, pool_size: int | None) -> int:
    """The pool: ``pool_size`` and the base retriever's ``k`` (:func:`base_retriever_k`) must agree when both known.

    >>> from types import SimpleNamespace
    >>> base_pool_size(SimpleNamespace(k=20), None), base_pool_size(SimpleNamespace(), 30)
    (20, 30)
    """
    return agreed_pool_size(
        base_retriever_k(base_retriever),
        pool_size,
        unknown=f"Cannot tell how many documents {type(base_retriever).__name__} returns; pass pool_size.",
        mismatch="The base retriever returns k={own} documents but pool_size={size}; configure it with "
        "search_kwargs={{'k': {size}}}.",
    )


def check_base_count(count: int, pool_size: int) -> None:
    """Refuse a base retriever that returned more documents than the calibration's pool.

    >>> check_base_count(3, 2)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: The base retriever returned 3 documents, more than pool_size=2.
    """
    if count > pool_size:
        raise ConformalError(f"The base retriever returned {count} documents, more than pool_size={pool_size}.")
