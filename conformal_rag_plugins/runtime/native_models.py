"""One call at a time on a model that is not thread-safe: a llama.cpp ``Llama`` behind a framework LLM.

LangChain's ``LlamaCpp`` answers ``ainvoke`` from executor threads, so concurrent draws would decode on one
llama.cpp context at once, which aborts the process. The library's LLM calls go through :func:`one_at_a_time`,
which serialises the calls on such a model (per event loop); any other model is called as it is.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_locks: weakref.WeakKeyDictionary[Any, dict[int, asyncio.Lock]] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def native_llama(model: Any) -> Any | None:
    """The llama.cpp ``Llama`` behind a LangChain ``LlamaCpp`` (``client``) or a LlamaIndex ``LlamaCPP`` (``_model``).

    >>> native_llama(object()) is None
    True
    """
    for attr in ("client", "_model"):
        try:
            inner = getattr(model, attr, None)
        except Exception:  # a pydantic model whose private attribute is not set yet
            inner = None
        if inner is not None and type(inner).__module__.split(".")[0] == "llama_cpp":
            return inner
    return None


def _lock(native: Any) -> asyncio.Lock:
    loop = id(asyncio.get_running_loop())
    with _guard:
        per_loop = _locks.setdefault(native, {})
        if loop not in per_loop:
            per_loop.clear()  # a lock belongs to one loop; an earlier loop of this model has ended
            per_loop[loop] = asyncio.Lock()
        return per_loop[loop]


async def one_at_a_time(model: Any, call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()``, alone among the calls on ``model`` when it is a llama.cpp model (else as it is).

    >>> asyncio.run(one_at_a_time(object(), lambda: asyncio.sleep(0, result="done")))
    'done'
    """
    native = native_llama(model)
    if native is None:
        return await call()
    async with _lock(native):
        return await call()
