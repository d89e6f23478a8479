"""Warnings that point at the user's line, not at the library or the event loop that ran it.

:func:`warn_at_caller` walks out of this package, ``asyncio``, ``concurrent.futures`` and
``threading`` to the caller's first frame (Python 3.12's ``skip_file_prefixes``, missing in 3.10
and 3.11); a fixed ``stacklevel`` would name ``asyncio/events.py``. On ``run_sync``'s worker
thread the walk continues from the frame that called ``run_sync``, recorded in a context
variable the thread inherits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import sys
import threading
import warnings
from types import FrameType


def _folder(module_file: str) -> str:
    """The folder of a package's ``__init__.py``, with a trailing separator."""
    return os.path.dirname(os.path.abspath(module_file)) + os.sep


#: Files whose frames are never "the caller": this package, the event loop, the thread pool.
_SKIPPED_PREFIXES: tuple[str, ...] = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # conformal_rag_plugins/
    _folder(asyncio.__file__),
    _folder(concurrent.futures.__file__),
    os.path.abspath(threading.__file__),
)

#: The frame that called ``run_sync`` when the coroutine runs on a worker thread.
_OUTER_FRAME: contextvars.ContextVar[FrameType | None] = contextvars.ContextVar("crp_outer_frame", default=None)


def remember_caller(frame: FrameType | None) -> None:
    """Record ``frame`` as where a worker thread's warnings continue their walk (call it in the thread's context)."""
    _OUTER_FRAME.set(frame)


def _skipped(frame: FrameType, modules: tuple[str, ...]) -> bool:
    if os.path.abspath(frame.f_code.co_filename).startswith(_SKIPPED_PREFIXES):
        return True
    name = str(frame.f_globals.get("__name__", ""))
    return bool(modules) and any(name == m or name.startswith(m + ".") for m in modules)


def _first_outside(frame: FrameType | None, modules: tuple[str, ...] = ()) -> FrameType | None:
    while frame is not None and _skipped(frame, modules):
        frame = frame.f_back
    return frame


def warn_at_caller(message: str, category: type[Warning], *, skip_modules: tuple[str, ...] = ()) -> None:
    """``warnings.warn(message, category)`` attributed to the first frame outside the library.

    Filters and the once-per-location registry apply at that frame; without such a frame (a bare
    thread) it names the caller's caller, as ``stacklevel=2`` there would. ``skip_modules``: more
    packages whose frames are passed over (``"llama_index"``: a warning raised in a callback that
    LlamaIndex calls names the user's line, not LlamaIndex's).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_at_caller("look here", UserWarning)
    >>> caught[0].filename == "<doctest conformal_rag_plugins.runtime.caller_warning.warn_at_caller[1]>"
    True
    """
    frame = _first_outside(sys._getframe(1), skip_modules)
    if frame is None:
        frame = _first_outside(_OUTER_FRAME.get(), skip_modules)
    if frame is None:
        warnings.warn(message, category, stacklevel=3)
        return
    module_globals = frame.f_globals
    warnings.warn_explicit(
        message,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get("__name__", "<string>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
        module_globals=module_globals,
    )
