"""A small persistent key -> JSON value store on SQLite (never pickle).

Used to resume LLM work after an interruption: generated calibration questions and
judge decisions are stored under a content hash of everything that changes the output
(:meth:`JsonCache.key`), so a re-run asks the LLM only for what is missing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["JsonCache", "default_cache_path", "open_cache"]


class JsonCache:
    """Persistent ``key -> JSON value`` store.

    Parameters
    ----------
    path : path or ":memory:"
        SQLite file (its folder is created), or ``":memory:"`` for a throw-away cache.

    Examples
    --------
    >>> cache = JsonCache(":memory:")
    >>> key = JsonCache.key("question-gen", "model", "prompt", 0, 0.7)
    >>> cache.get(key) is None
    True
    >>> cache.put(key, {"text": '{"question": "Who?"}'})
    >>> cache.get(key)
    {'text': '{"question": "Who?"}'}
    >>> len(cache)
    1
    """

    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()
        self._lock = threading.Lock()

    @staticmethod
    def key(*parts: Any) -> str:
        """SHA-256 of the JSON list of ``parts`` (strings, numbers, ``None``, lists, dicts)."""
        payload = json.dumps(list(parts), ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Any | None:
        """The stored value, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value (committed at once)."""
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, text))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM kv").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()


def default_cache_path(name: str = "calibration_llm.sqlite") -> Path:
    """``default_cache_dir() / name``: where generated questions and judge decisions are cached.

    Examples
    --------
    >>> default_cache_path().name
    'calibration_llm.sqlite'
    """
    from .paths import default_cache_dir

    return default_cache_dir() / name


def open_cache(spec: JsonCache | str | Path | bool | None) -> JsonCache | None:
    """A cache from a user setting: ``True`` the default file, ``False``/``None`` none, a path that file.

    Examples
    --------
    >>> open_cache(False) is None, isinstance(open_cache(":memory:"), JsonCache)
    (True, True)
    """
    if spec is None or spec is False:
        return None
    if spec is True:
        return JsonCache(default_cache_path())
    if isinstance(spec, JsonCache):
        return spec
    return JsonCache(spec)
