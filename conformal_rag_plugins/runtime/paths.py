"""Where the library keeps its on-disk caches, and a path resolved without a bare ``RuntimeError``."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def resolved(path: str | Path) -> Path:
    """``Path(path).resolve()``, a symbolic link loop raised as ``OSError(ELOOP)`` naming ``path``.

    Python before 3.13 raises a bare ``RuntimeError("Symlink loop from ...")``, which the command line
    would print as a traceback; an ``OSError`` naming the file is its one-line error with exit code 2.

    Examples
    --------
    >>> resolved("a/../b") == Path("b").resolve()
    True
    """
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise OSError(errno.ELOOP, "a symbolic link loop (a link that points back to itself)", str(path)) from None


def default_cache_dir() -> Path:
    """``$CONFORMAL_RAG_CACHE`` or ``~/.cache/conformal-rag`` (created if missing).

    Examples
    --------
    >>> default_cache_dir().is_dir()
    True
    """
    root = os.environ.get("CONFORMAL_RAG_CACHE") or os.path.join(Path.home(), ".cache", "conformal-rag")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
