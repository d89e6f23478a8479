"""Moved to :mod:`conformal_rag_plugins.runtime.kv_cache` (kept so old imports work)."""

from ..runtime.kv_cache import *  # noqa: F403
from ..runtime.kv_cache import __all__  # noqa: F401
