"""Run a coroutine to completion from synchronous code, also inside Jupyter's running event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from .caller_warning import remember_caller

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, or the same on a short-lived worker thread (blocking) when a loop already runs.

    ``asyncio.run`` refuses to start inside a running loop (a notebook, an async handler). The thread
    runs in a copy of the caller's context variables, so LlamaIndex and LangChain tracing nests the
    coroutine's work under the caller's span.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    # warnings raised on the worker thread continue their walk to the user's frame from here
    context.run(remember_caller, sys._getframe(1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, coro).result()
