"""Moved to :mod:`conformal_rag_plugins.runtime.retry` (kept so old imports work)."""

from ..runtime.retry import *  # noqa: F403
from ..runtime.retry import __all__  # noqa: F401
