"""Draw ``n`` samples concurrently under a limit, with retries, a timeout and the sample cache."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable

from ..runtime.retry import call_with_retries
from .sample_cache import SampleCache
from .sample_record import Sample


class ConcurrencyLimit:
    """At most ``max_concurrency`` LLM calls at once, shared by every draw of one sampler.

    ``asyncio.Semaphore`` binds to one event loop, so one semaphore is kept per running loop.

    >>> limit = ConcurrencyLimit(1)
    >>> async def two_semaphores():
    ...     return limit.semaphore() is limit.semaphore()
    >>> asyncio.run(two_semaphores())
    True
    """

    def __init__(self, max_concurrency: int) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}.")
        self.max_concurrency = max_concurrency
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def semaphore(self) -> asyncio.Semaphore:
        """The semaphore of the running event loop."""
        loop = asyncio.get_running_loop()
        if loop not in self._by_loop:
            self._by_loop[loop] = asyncio.Semaphore(self.max_concurrency)
        return self._by_loop[loop]


async def draw_samples(
    call_once: Callable[[], Awaitable[Sample]],
    *,
    n: int,
    max_concurrency: int,
    retries: int,
    timeout: float | None,
    cache: SampleCache | None = None,
    key: str | None = None,
    limit: ConcurrencyLimit | None = None,
) -> list[Sample]:
    """Run ``call_once`` ``n`` times (at most ``max_concurrency`` at once); failures become empty samples.

    The timeout covers each call, not the wait for a slot. A cache hit skips the LLM; a fresh draw
    is stored unless every call failed.

    >>> async def once():
    ...     return Sample("Rollo")
    >>> [s.text for s in asyncio.run(draw_samples(once, n=2, max_concurrency=1, retries=0, timeout=None))]
    ['Rollo', 'Rollo']
    """
    semaphore = (limit or ConcurrencyLimit(max_concurrency)).semaphore()
    # The cache is read under the semaphore, so with max_concurrency=1 the draws of concurrent calls
    # (one per chunk) reach the LLM in the order the calls were made, not in the order their cache
    # threads finish: a seeded local model then gives the same samples on every run. Cache reads and
    # writes may wait on another process's lock: off the event loop.
    if cache is not None and key is not None:
        async with semaphore:
            hit = await asyncio.to_thread(cache.get, key, n)  # a row of another length is a miss
        if hit is not None:
            return hit

    async def one() -> Sample:
        async with semaphore:
            got = await call_with_retries(call_once, retries=retries, timeout=timeout)
        return got if got is not None else Sample("", failed=True)

    samples = list(await asyncio.gather(*(one() for _ in range(n))))
    if cache is not None and key is not None and not all(s.failed for s in samples):
        await asyncio.to_thread(cache.put, key, samples)  # a failed write only logs a warning
    return samples
