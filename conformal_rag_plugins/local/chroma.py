"""Chroma helpers for the offline stack: telemetry off, cosine space, exact-enough HNSW."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..runtime.paths import resolved

# High ef values make HNSW near-exact on corpora of this size (NOTES: default ef gave recall@20 ~0.77).
HNSW_CONFIG: dict[str, Any] = {"hnsw": {"space": "cosine", "ef_search": 500, "ef_construction": 500}}


#: Words of a Chroma (or SQLite) error that mean the disk, not the data, is at fault, and the errno they stand for.
#: Measured with chromadb 1.5.9: ``InternalError("Read-only file system (os error 30)")`` opening a client on a
#: read-only folder, ``InternalError("Database error: ... (code: 13) database or disk is full")`` writing a full one.
_DISK_FAULTS = (
    ("disk is full", errno.ENOSPC),
    ("no space left", errno.ENOSPC),
    ("read-only file system", errno.EROFS),
    ("readonly database", errno.EROFS),
    ("permission denied", errno.EACCES),
)


def disk_error(exc: BaseException, folder: str | Path | None = None) -> OSError | None:
    """The ``OSError`` a Chroma or SQLite error stands for when the disk under ``folder`` is at fault, else ``None``.

    Chroma reports a full or read-only disk as its own ``InternalError``, which the command line would
    print as a traceback; as an ``OSError`` naming the folder it is one line with exit code 2.

    Examples
    --------
    >>> import sqlite3
    >>> error = disk_error(sqlite3.OperationalError("database or disk is full"), "/data/chroma")
    >>> error.filename, error.strerror.split(":")[0]
    ('/data/chroma', 'No space left on device')
    >>> disk_error(ValueError("disk is full")) is None  # not a store's error: left alone
    True
    """
    module = type(exc).__module__ or ""
    if isinstance(exc, OSError) or not module.startswith(("chromadb", "sqlite3")):
        return None
    text = " ".join(str(exc).split())
    code = next((c for words, c in _DISK_FAULTS if words in text.lower()), None)
    if code is None:
        return None
    reason = (
        f"{os.strerror(code)}: Chroma cannot write its index there ({text}); make room, or pass a folder on a "
        "writable disk (--persist-dir, persist_dir=)"
    )
    return OSError(code, reason, str(folder) if folder is not None else "the Chroma folder")


def chroma_client(path: str | Path | None = None, *, host: str | None = None, port: int | None = None) -> Any:
    """A persistent (``path``), server (``host``/``port``) or in-memory client, telemetry off.

    ``path`` is made absolute first: Chroma shares one client per path string within a process, so a
    relative ``"chroma"`` opened again after a change of working directory would reach the first
    directory's database (or fail to open it) instead of the new one. A folder on a full or read-only
    disk raises :func:`disk_error`'s ``OSError``.
    """
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if host is not None:
        return chromadb.HttpClient(host=host, port=port or 8000, settings=settings)
    if path is not None:
        folder = resolved(Path(path).expanduser())
        try:
            return chromadb.PersistentClient(path=str(folder), settings=settings)
        except Exception as exc:  # a full or read-only disk: an OSError naming the folder; anything else as raised
            error = disk_error(exc, folder)
            if error is None:
                raise
            raise error from exc
    return chromadb.EphemeralClient(settings=settings)


def get_collection(client: Any, name: str) -> Any:
    """Get or create a cosine-space collection that takes caller-supplied embeddings."""
    return client.get_or_create_collection(name, embedding_function=None, configuration=HNSW_CONFIG)


def open_collection(client: Any, name: str) -> tuple[Any, Any]:
    """``(client, collection)``: ``client`` (a new in-memory one when ``None``) and its collection ``name``."""
    client = client if client is not None else chroma_client()
    return client, get_collection(client, name)


def stored_ids(collection: Any, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` already in ``collection`` (a filled collection is reused, not embedded again)."""
    return set(collection.get(ids=list(ids), include=[])["ids"])


def stored_texts(collection: Any, ids: Sequence[str]) -> dict[str, str]:
    """The texts of those of ``ids`` that ``collection`` holds, by id."""
    got = collection.get(ids=list(ids), include=["documents"])
    return {i: d for i, d in zip(got["ids"], got["documents"], strict=True) if d is not None}


def chunks_by_metadata(collection: Any, keys: Sequence[str], values: Sequence[str]) -> list[tuple[str, str, dict]]:
    """``(id, text, metadata)`` of the chunks whose metadata holds one of ``values`` under one of ``keys``."""
    among = {"$in": sorted(values)}
    got = collection.get(where={"$or": [{k: among} for k in keys]}, include=["documents", "metadatas"])
    return [(str(i), t or "", m or {}) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)]


def chroma_space(collection: Any) -> str:
    """The distance space of a chromadb collection (``l2`` when unset)."""
    space = None
    config = getattr(collection, "configuration", None) or getattr(collection, "configuration_json", None)
    if isinstance(config, dict):
        space = (config.get("hnsw") or {}).get("space")
    meta = getattr(collection, "metadata", None) or {}
    return str(space or meta.get("hnsw:space") or "l2")


def add_in_batches(
    collection: Any,
    ids: Sequence[str],
    embeddings: Any,
    documents: Sequence[str],
    metadatas: Sequence[dict[str, Any]] | None = None,
    batch: int = 5000,
) -> None:
    """``collection.add`` in chunks below Chroma's maximum batch size."""
    for start in range(0, len(ids), batch):
        end = start + batch
        collection.add(
            ids=list(ids[start:end]),
            embeddings=[list(map(float, v)) for v in embeddings[start:end]],
            documents=list(documents[start:end]),
            metadatas=list(metadatas[start:end]) if metadatas is not None else None,
        )


#: Most result rows (queries x ``n_results``) one batched Chroma query may return: Chroma reads them back
#: from SQLite with one variable per row, and SQLite refuses more than 32,766 variables.
MAX_QUERY_ROWS = 16_000
#: The keys of a Chroma query result that hold one list per query.
_PER_QUERY = ("ids", "documents", "metadatas", "distances", "embeddings", "uris", "data")


def query_in_batches(
    collection: Any,
    embeddings: Sequence[Sequence[float]],
    n_results: int,
    *,
    max_rows: int = MAX_QUERY_ROWS,
    **kwargs: Any,
) -> list[dict[str, list[Any]]]:
    """``collection.query`` for many query vectors, a few hundred per call; one result per vector.

    Each result equals the unwrapped one-query result (Chroma answers every query of a batch on its
    own); a call holds at most ``max_rows // n_results`` queries (at least one).
    """
    if n_results < 1:
        raise ValueError(f"n_results must be at least 1, got {n_results}.")
    step = max(1, int(max_rows) // int(n_results))
    out: list[dict[str, list[Any]]] = []
    for start in range(0, len(embeddings), step):
        block = [list(map(float, v)) for v in embeddings[start : start + step]]
        result = collection.query(query_embeddings=block, n_results=n_results, **kwargs)
        fields = {key: result[key] for key in _PER_QUERY if isinstance(result.get(key), list)}
        out.extend({key: value[i] for key, value in fields.items()} for i in range(len(block)))
    return out
