"""Moved to :mod:`conformal_rag_plugins.runtime.json_output` (kept so old imports work)."""

from ..runtime.json_output import *  # noqa: F403
from ..runtime.json_output import __all__  # noqa: F401
