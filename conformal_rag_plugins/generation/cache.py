"""SQLite cache of sampled answers, so a crash or a re-run loses no paid work.

Keys hash (question, chunk text, model id, prompt template, temperature, n).
Values are JSON (never pickle).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from .samples import Sample

__all__ = ["SampleCache"]


class SampleCache:
    """Persistent ``key -> list[Sample]`` store.

    Examples
    --------
    >>> cache = SampleCache(":memory:")
    >>> key = SampleCache.key("q", "ctx", "model", "tmpl", 1.0, 2)
    >>> cache.put(key, [Sample("a"), Sample("b")])
    >>> [s.text for s in cache.get(key)]
    ['a', 'b']
    """

    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS samples (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()
        self._lock = threading.Lock()

    @staticmethod
    def key(question: str, context: str, model: str, template: str, temperature: float | None, n: int) -> str:
        """Content hash of everything that changes the samples."""
        payload = json.dumps([question, context, model, template, temperature, n], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, key: str) -> list[Sample] | None:
        """Cached samples, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT value FROM samples WHERE key = ?", (key,)).fetchone()
        return [Sample.from_dict(d) for d in json.loads(row[0])] if row else None

    def put(self, key: str, samples: Sequence[Sample]) -> None:
        """Store samples (committed at once)."""
        value = json.dumps([s.to_dict() for s in samples], ensure_ascii=False)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO samples VALUES (?, ?)", (key, value))
            self._db.commit()
