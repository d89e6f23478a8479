"""Fixtures shared by the unit tests: one fake :class:`AnswerSetHost` for the answer-set calibration tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from conformal_rag_plugins.answer_sets.options import SamplingOptions
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, collect_observations

FAKE_FINGERPRINT = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")


class FakeAnswerSetHost:
    """A fake answer-set host over ``pool(question)``, ``text_of(chunk id)`` and ``sample(question, context)``.

    It implements :class:`~conformal_rag_plugins.answer_sets.host.AnswerSetHost` and is its own
    :class:`~conformal_rag_plugins.answer_sets.host.GeneratorSampler` (``calls`` counts its draws);
    its retrieval stage is a split calibration at 90% (relative scores) over ``pool_size`` candidates.
    """

    def __init__(
        self,
        pool: Callable[[str], CandidatePool],
        text_of: Callable[[str], str | None],
        sample: Callable[[str, str], Awaitable[list[Sample]]],
        *,
        pool_size: int,
        identity: dict[str, Any] | None = None,
    ) -> None:
        self.fetch, self._text_of, self._sample = pool, text_of, sample
        self.pool_size, self._identity = pool_size, identity
        self.calls = 0

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        return {i: text for i in ids if (text := self._text_of(i)) is not None}

    def calibrate_retrieval(self, examples, **_: Any):
        return calibrate_from_pools(
            collect_observations(examples, self.fetch, progress=False),
            fingerprint=FAKE_FINGERPRINT,
            pool_size=self.pool_size,
            options=RetrievalOptions(confidence_level=0.9, score="relative", method="split", random_state=0),
        )

    def sampler(self, options: SamplingOptions) -> FakeAnswerSetHost:
        return self

    def embedding(self, embedder: Any) -> None:
        return None

    async def asample(self, question: str, context: str) -> list[Sample]:
        self.calls += 1
        return await self._sample(question, context)

    def identity(self) -> dict[str, Any] | None:
        return self._identity

    def model_label(self) -> str:
        return "fake"


@pytest.fixture
def fake_answer_host() -> type[FakeAnswerSetHost]:
    """The fake answer-set host class (build it with the test's pools, texts and sampler)."""
    return FakeAnswerSetHost
