"""Draw ``n`` samples concurrently under a limit, with retries, a timeout and the sample cache."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from .cache import SampleCache
from .retry import call_with_retries
from .samples import Sample

__all__ = ["draw_samples"]


async def draw_samples(
    call_once: Callable[[], Awaitable[Sample]],
    *,
    n: int,
    max_concurrency: int,
    retries: int,
    timeout: float | None,
    cache: SampleCache | None = None,
    key: str | None = None,
) -> list[Sample]:
    """Run ``call_once`` ``n`` times (at most ``max_concurrency`` at once); failures become empty samples.

    With a ``cache`` and ``key``, a hit returns the stored samples without calling the LLM, and a
    fresh draw is stored unless every call failed.

    Examples
    --------
    >>> async def once():
    ...     return Sample("Rollo")
    >>> [s.text for s in asyncio.run(draw_samples(once, n=2, max_concurrency=1, retries=0, timeout=None))]
    ['Rollo', 'Rollo']
    """
    if cache is not None and key is not None and (hit := cache.get(key)) is not None:
        return hit
    semaphore = asyncio.Semaphore(max_concurrency)

    async def guarded() -> Sample:
        async with semaphore:
            return await call_once()

    async def one() -> Sample:
        got = await call_with_retries(guarded, retries=retries, timeout=timeout)
        return got if got is not None else Sample("", failed=True)

    samples = list(await asyncio.gather(*(one() for _ in range(n))))
    if cache is not None and key is not None and not all(s.failed for s in samples):
        cache.put(key, samples)
    return samples
