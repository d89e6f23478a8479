"""Where the library keeps its on-disk caches."""

from __future__ import annotations

import os
from pathlib import Path


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
