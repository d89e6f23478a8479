"""The command line's frameworks: a name (``--framework``) to the adapter's ``FRAMEWORK`` object.

Each loader is a plain import of one adapter's ``framework.py``, run only when that framework is
asked for, so ``import conformal_rag_plugins`` stays light and a LlamaIndex run never imports
LangChain. The commands and the benchmarks look a framework up here instead of branching on its
name (``tests/test_frameworks.py``).

Examples
--------
>>> get_framework("haystack")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.ConformalError: framework must be one of ('llamaindex', 'langchain'), got 'haystack'.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import ConformalError
from ..frameworks import FrameworkAdapter


def _llamaindex() -> FrameworkAdapter:
    from ..llamaindex.framework import FRAMEWORK

    return FRAMEWORK


def _langchain() -> FrameworkAdapter:
    from ..langchain.framework import FRAMEWORK

    return FRAMEWORK


#: Framework name -> its loader, in the order the command line lists them (the first is the default).
_LOADERS: dict[str, Callable[[], FrameworkAdapter]] = {"llamaindex": _llamaindex, "langchain": _langchain}

#: The registered framework names (``--framework`` choices; the first is the default).
FRAMEWORKS: tuple[str, ...] = tuple(_LOADERS)


def get_framework(name: str) -> FrameworkAdapter:
    """The adapter object of ``name`` (imported now); ``ConformalError`` if not in :data:`FRAMEWORKS`."""
    if name not in _LOADERS:
        raise ConformalError(f"framework must be one of {FRAMEWORKS}, got {name!r}.")
    return _LOADERS[name]()
