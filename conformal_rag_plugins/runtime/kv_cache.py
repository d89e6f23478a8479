"""A persistent key -> JSON value store on SQLite (never pickle), shared safely by processes and threads.

It lets LLM work resume: generated questions and judge decisions are stored under a content hash
(:meth:`JsonCache.key`), so a re-run asks only for what is missing. The file uses WAL (readers and
writer never block each other; keep it on a local disk, not NFS) and autocommit (a ``SIGKILL``
loses at most the write in progress). Busy/locked errors wait ``busy_timeout``, then are retried
with jittered backoff (:func:`retry_busy`); a ``put`` that still fails logs a warning and returns
``False`` (never losing a paid LLM answer), a ``get`` that still fails is a miss.

A cache never stops a run. A file that is not a readable SQLite database (random bytes, truncated:
:func:`is_corrupt_error`) is moved aside (``<name>.unreadable-<time>``) with a logged warning and a
fresh file is used; a file or folder that cannot be opened or created (a read-only folder) gives a
logged warning and an in-memory cache for the run. Rows are checked by the caller against what
their key promises (:meth:`JsonCache.get` ``valid=``); a bad row is a miss, rewritten by the next put.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .strict_json import loads_finite

T = TypeVar("T")
S = TypeVar("S", bound="SqliteStore")
logger = logging.getLogger("conformal_rag_plugins")

BUSY_TIMEOUT = 30.0
"""Seconds SQLite itself waits for a lock before reporting "database is locked"."""
RETRIES = 5
"""Further attempts after a busy/locked error that outlasted the busy timeout."""
BACKOFF = 0.05
"""First backoff delay in seconds (doubled per attempt, capped at :data:`MAX_BACKOFF`, jittered)."""
MAX_BACKOFF = 2.0

_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6  # primary result codes (sqlite3.SQLITE_BUSY needs Python >= 3.11)
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_jitter = random.Random()  # own generator: never touches the global random state of the user


def is_busy_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked/busy" (worth retrying).

    Examples
    --------
    >>> is_busy_error(sqlite3.OperationalError("database is locked")), is_busy_error(ValueError("locked"))
    (True, False)
    """
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in (_SQLITE_BUSY, _SQLITE_LOCKED):  # Python >= 3.11
        return True
    message = str(exc).lower()
    return "database is locked" in message or "database is busy" in message or "database table is locked" in message


def is_corrupt_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the file is not a readable SQLite database (random bytes, truncated, malformed).

    Examples
    --------
    >>> is_corrupt_error(sqlite3.DatabaseError("file is not a database"))
    True
    >>> is_corrupt_error(sqlite3.OperationalError("database is locked"))
    False
    """
    if not isinstance(exc, sqlite3.DatabaseError) or is_busy_error(exc):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB):  # Python >= 3.11
        return True
    message = str(exc).lower()
    return "file is not a database" in message or "malformed" in message


def retry_busy(
    operation: Callable[[], T],
    *,
    retries: int = RETRIES,
    backoff: float = BACKOFF,
    what: str = "SQLite operation",
) -> T:
    """Run ``operation()`` (one short transaction); on a busy/locked error sleep and retry, ``retries`` more times.

    The delay starts at ``backoff`` seconds, doubles up to :data:`MAX_BACKOFF` and is multiplied by a
    random factor in ``[0.5, 1.5)`` so competing processes do not retry in step. The last busy error,
    or any other operational error at once, is raised.

    Examples
    --------
    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise sqlite3.OperationalError("database is locked")
    ...     return "done"
    >>> retry_busy(flaky, backoff=0.001), len(calls)
    ('done', 3)
    """
    delay = backoff
    for attempt in range(retries + 1):
        try:
            return operation()
        except sqlite3.OperationalError as exc:
            if attempt >= retries or not is_busy_error(exc):
                raise
            logger.debug("%s: %s; retry %d/%d", what, exc, attempt + 1, retries)
            time.sleep(delay * (0.5 + _jitter.random()))
            delay = min(delay * 2.0, MAX_BACKOFF)
    raise AssertionError("unreachable")  # pragma: no cover


class SqliteStore:
    """A ``key -> text`` table in one SQLite file (or ``":memory:"``; folder created); subclasses set :attr:`table`.

    ``busy_timeout`` is how long SQLite waits for a lock; ``retries``/``backoff`` bound the retries of
    a busy open, read or write (:func:`retry_busy`).
    """

    table: str = "kv"
    column: str = "value"

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = BUSY_TIMEOUT,
        retries: int = RETRIES,
        backoff: float = BACKOFF,
    ) -> None:
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self.retries = retries
        self.backoff = backoff
        self._lock = threading.Lock()
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        """Connect to :attr:`path`; an unreadable file is moved aside for a fresh one, an unopenable one is
        replaced by an in-memory database (both logged). A lock that outlasts the retries is raised."""
        if self.path == ":memory:":
            return self._connect()
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            return retry_busy(self._connect, retries=self.retries, backoff=self.backoff, what=f"opening {self.path}")
        except sqlite3.Error as exc:
            if is_busy_error(exc):
                raise  # another process holds it: nothing paid yet, so failing loudly here is right
            if is_corrupt_error(exc):
                return self._second_look(exc)
            reason = str(exc)
        except OSError as exc:  # the folder cannot be created
            reason = exc.strerror or str(exc)
        return self._in_memory(reason)

    def _in_memory(self, reason: str) -> sqlite3.Connection:
        """An in-memory database for this run, logged: the file cannot be opened or created."""
        logger.warning(
            "Cache %s cannot be opened (%s); this run uses an in-memory cache (nothing is kept after it).",
            self.path,
            reason,
        )
        self.path = ":memory:"
        return self._connect()

    def _second_look(self, exc: BaseException) -> sqlite3.Connection:
        """Open again after a moment (never move aside a file another process was just creating), else
        :meth:`_fresh_file`."""
        time.sleep(self.backoff)
        try:
            return self._connect()
        except sqlite3.Error as again:
            if is_busy_error(again):
                raise
            if not is_corrupt_error(again):
                return self._in_memory(str(again))
        return self._fresh_file(exc)

    def _fresh_file(self, exc: BaseException) -> sqlite3.Connection:
        """Move the unreadable file (and its ``-wal``/``-shm``) aside and open a fresh one (else in memory)."""
        aside = f"{self.path}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.replace(self.path + suffix, aside + suffix)
            db = retry_busy(self._connect, retries=self.retries, backoff=self.backoff, what=f"opening {self.path}")
        except (OSError, sqlite3.Error) as again:
            logger.warning(
                "Cache %s is not a readable SQLite database (%s) and cannot be replaced (%s); this run uses an "
                "in-memory cache.",
                self.path,
                exc,
                again,
            )
            self.path = ":memory:"
            return self._connect()
        logger.warning(
            "Cache %s is not a readable SQLite database (%s); it was moved to %s and a fresh cache is used.",
            self.path,
            exc,
            aside,
        )
        return db

    def _recover(self, exc: BaseException, failed: sqlite3.Connection) -> None:
        """After a read or write on ``failed`` found the file corrupt: continue on a fresh file (as :meth:`_open`).

        Nothing is done when another thread has already replaced ``failed``.
        """
        if not is_corrupt_error(exc) or self.path == ":memory:":
            return
        with self._lock:
            if self._db is not failed:
                return
            self._db.close()
            self._db = self._fresh_file(exc)

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: autocommit, each statement is its own (short) transaction
        db = sqlite3.connect(self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None)
        try:
            if self.path != ":memory:":
                mode = str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower()
                if mode != "wal":  # switching needs a moment's exclusive lock: busy errors are retried
                    mode = str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
                if mode != "wal":
                    logger.warning("SQLite cache %s could not use WAL (journal mode %r).", self.path, mode)
                # in WAL mode NORMAL never corrupts the file and a killed process loses no commit
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, {self.column} NOT NULL)")
        except BaseException:
            db.close()
            raise
        return db

    def _retry(self, operation: Callable[[], T], what: str) -> T:
        return retry_busy(operation, retries=self.retries, backoff=self.backoff, what=f"{what} {self.path}")

    def get_text(self, key: str) -> str | None:
        """The stored text, or ``None`` (also when the read still fails after the retries; logged)."""

        def read() -> str | None:
            with self._lock:
                row = self._db.execute(f"SELECT {self.column} FROM {self.table} WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        db = self._db
        try:
            return self._retry(read, "reading")
        except sqlite3.Error as exc:
            logger.warning("Cache read from %s failed (%s); treated as a miss.", self.path, exc)
            self._recover(exc, db)
            return None

    def put_text(self, key: str, text: str) -> bool:
        """Store ``text`` (committed at once); ``False`` with a logged warning if it still fails."""

        def write() -> None:
            with self._lock:
                self._db.execute(f"INSERT OR REPLACE INTO {self.table} (key, {self.column}) VALUES (?, ?)", (key, text))

        db = self._db
        try:
            self._retry(write, "writing")
        except sqlite3.Error as exc:
            logger.warning("Cache write to %s failed (%s); the result is used but not cached.", self.path, exc)
            self._recover(exc, db)
            return False
        return True

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """Stored values (as written) of the ``keys`` present; ``{}`` on a failed read."""

        def read() -> dict[str, Any]:
            found: dict[str, Any] = {}
            with self._lock:
                for start in range(0, len(keys), 500):  # SQLite caps the number of parameters
                    part = list(keys[start : start + 500])
                    marks = ",".join("?" * len(part))
                    query = f"SELECT key, {self.column} FROM {self.table} WHERE key IN ({marks})"
                    found.update(dict(self._db.execute(query, part).fetchall()))
            return found

        db = self._db
        try:
            return self._retry(read, "reading")
        except sqlite3.Error as exc:
            logger.warning("Cache read from %s failed (%s); treated as misses.", self.path, exc)
            self._recover(exc, db)
            return {}

    def put_many(self, items: Sequence[tuple[str, Any]]) -> bool:
        """Store ``(key, value)`` pairs in one transaction; ``False`` with a logged warning on failure."""

        def write() -> None:
            with self._lock, self._db:  # one transaction for the batch
                self._db.execute("BEGIN")
                self._db.executemany(
                    f"INSERT OR REPLACE INTO {self.table} (key, {self.column}) VALUES (?, ?)", list(items)
                )

        db = self._db
        try:
            self._retry(write, "writing")
        except sqlite3.Error as exc:
            logger.warning("Cache write to %s failed (%s); the results are used but not cached.", self.path, exc)
            self._recover(exc, db)
            return False
        return True

    def keys(self) -> list[str]:
        """Every stored key (sorted)."""

        def read() -> list[str]:
            with self._lock:
                return [str(r[0]) for r in self._db.execute(f"SELECT key FROM {self.table} ORDER BY key")]

        return self._retry(read, "listing")

    def __len__(self) -> int:
        def count() -> int:
            with self._lock:
                return int(self._db.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

        return self._retry(count, "counting")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class JsonCache(SqliteStore):
    """Persistent ``key -> JSON value`` store (arguments as :class:`SqliteStore`).

    Examples
    --------
    >>> cache = JsonCache(":memory:")
    >>> key = JsonCache.key("question-gen", "model", "prompt", 0, 0.7)
    >>> cache.put(key, {"text": '{"question": "Who?"}'}), cache.get(key), len(cache)
    (True, {'text': '{"question": "Who?"}'}, 1)
    """

    table = "kv"

    @staticmethod
    def key(*parts: Any) -> str:
        """SHA-256 of the JSON list of ``parts`` (strings, numbers, ``None``, lists, dicts)."""
        payload = json.dumps(list(parts), ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, key: str, valid: Callable[[Any], bool] | None = None) -> Any | None:
        """The stored value, or ``None``: also for a row that is not JSON or that ``valid(value)`` refuses
        (a bad row is a miss, logged; the caller's next :meth:`put` under the key rewrites it).

        >>> cache = JsonCache(":memory:")
        >>> cache.put_text("k", "[]"), cache.get("k"), cache.get("k", valid=is_text_record)
        (True, [], None)
        """
        text = self.get_text(key)
        if text is None:
            return None
        try:
            value = loads_finite(text)  # NaN, Infinity, 1e999 and deep nesting are a bad row, not a value
        except (ValueError, RecursionError):
            value, ok = None, False
        else:
            ok = valid is None or bool(valid(value))
        if not ok:
            logger.warning("Cache %s holds a malformed row under %s; treated as a miss.", self.path, key[:16])
            return None
        return value

    def put(self, key: str, value: Any) -> bool:
        """Store a JSON-serialisable value (committed at once); ``False`` and a logged warning if not stored."""
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            logger.warning("Cache value for %s is not JSON (%s); not cached.", self.path, exc)
            return False
        return self.put_text(key, text)


def is_text_record(value: Any) -> bool:
    """Whether a cached value is ``{"text": str}`` (what question generation and the judge store).

    >>> is_text_record({"text": "yes"}), is_text_record({"txt": "yes"}), is_text_record([])
    (True, False, False)
    """
    return isinstance(value, dict) and isinstance(value.get("text"), str)


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
