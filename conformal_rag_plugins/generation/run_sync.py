"""Moved to :mod:`conformal_rag_plugins.runtime.run_sync` (kept so old imports work)."""

from ..runtime.run_sync import *  # noqa: F403
from ..runtime.run_sync import __all__  # noqa: F401
