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
