"""One concurrency limit per sampler: all draws share it, and waiting for a slot is not a timeout."""

from __future__ import annotations

import asyncio

import pytest

from conformal_rag_plugins.answer_sets.concurrent_draws import ConcurrencyLimit, draw_samples
from conformal_rag_plugins.answer_sets.sample_record import Sample


class _Tracker:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight = 0
        self.peak = 0
        self.calls = 0

    async def __call__(self) -> Sample:
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        return Sample("Rollo")


def test_shared_limit_bounds_calls_across_draws() -> None:
    tracker = _Tracker(0.01)
    limit = ConcurrencyLimit(2)

    async def many_chunks():
        draws = (draw_samples(tracker, n=3, max_concurrency=2, retries=0, timeout=None, limit=limit) for _ in range(5))
        return await asyncio.gather(*draws)

    out = asyncio.run(many_chunks())
    assert tracker.calls == 15 and tracker.peak == 2
    assert all(s.text == "Rollo" for draw in out for s in draw)


def test_without_a_shared_limit_each_draw_has_its_own() -> None:
    tracker = _Tracker(0.01)

    async def many_chunks():
        await asyncio.gather(
            *(draw_samples(tracker, n=2, max_concurrency=1, retries=0, timeout=None) for _ in range(3))
        )

    asyncio.run(many_chunks())
    assert tracker.peak == 3  # why samplers pass their shared limit


def test_waiting_for_a_slot_does_not_count_against_the_timeout() -> None:
    tracker = _Tracker(0.05)
    samples = asyncio.run(draw_samples(tracker, n=6, max_concurrency=1, retries=0, timeout=0.2))
    assert [s.failed for s in samples] == [False] * 6 and tracker.peak == 1  # 6 x 0.05 s in a row > 0.2 s


def test_limit_is_reusable_across_event_loops() -> None:
    limit = ConcurrencyLimit(1)
    for _ in range(2):  # a semaphore bound to a closed loop would raise here
        asyncio.run(draw_samples(_Tracker(0.0), n=2, max_concurrency=1, retries=0, timeout=None, limit=limit))


def test_limit_rejects_zero() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        ConcurrencyLimit(0)


def test_one_slot_with_a_cache_draws_in_the_order_of_the_calls(tmp_path) -> None:
    """With one slot, concurrent draws (one per chunk) reach the LLM in call order, on every run.

    A seeded local model's samples depend on the order of its calls; the cache's threads must not decide it.
    """
    from conformal_rag_plugins.answer_sets.sample_cache import SampleCache

    def one_run(path) -> list[str]:
        order: list[str] = []
        limit, cache = ConcurrencyLimit(1), SampleCache(path)

        def caller(chunk: str):
            async def call_once() -> Sample:
                order.append(chunk)
                await asyncio.sleep(0)
                return Sample(chunk)

            return call_once

        async def chunks():
            def draw(c: str):
                return draw_samples(
                    caller(c), n=2, max_concurrency=1, retries=0, timeout=None, cache=cache, key=c, limit=limit
                )

            await asyncio.gather(*(draw(c) for c in "abcdef"))

        asyncio.run(chunks())
        return order

    orders = [one_run(tmp_path / f"run{i}.sqlite") for i in range(6)]
    assert orders[0] == [c for c in "abcdef" for _ in range(2)]
    assert all(o == orders[0] for o in orders[1:])
