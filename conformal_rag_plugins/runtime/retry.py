"""Timeouts and retries with exponential backoff for LLM calls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
logger = logging.getLogger("conformal_rag_plugins")


async def call_with_retries(
    make_call: Callable[[], Awaitable[T]],
    *,
    retries: int = 3,
    timeout: float | None = 60.0,
    backoff: float = 0.5,
    raise_last: bool = False,
) -> T | None:
    """Await ``make_call()`` with a timeout; retry with backoff; ``None`` after the last failure.

    The caller counts ``None`` as a failed sample (an abstention), so one bad call
    never crashes a long calibration run. With ``raise_last`` the last failure is raised instead
    (nothing logged), for a caller that decides itself whether a failure is fatal.

    Examples
    --------
    >>> async def ok():
    ...     return 1
    >>> asyncio.run(call_with_retries(ok))
    1
    >>> async def down():
    ...     raise ConnectionError("refused")
    >>> asyncio.run(call_with_retries(down, retries=0, raise_last=True))
    Traceback (most recent call last):
    ...
    ConnectionError: refused
    """
    for attempt in range(retries + 1):
        try:
            if timeout is None:
                return await make_call()
            return await asyncio.wait_for(make_call(), timeout)
        except Exception as exc:  # any provider error is retried, then counted
            if attempt == retries:
                if raise_last:
                    raise
                logger.warning("LLM call failed after %d attempts: %r", retries + 1, exc)
                return None
            await asyncio.sleep(backoff * (2**attempt))
    return None
