"""What both frameworks' answer-set and adaptive synthesizers decide, written once over their sampler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from .adaptive_context import AdaptiveResult, EstimateFn, aadaptive_answer
from .calibration import AnswerSetCalibration
from .engine import AnswerSetResult, ChunkInput, abuild_answer_set
from .identity import live_generator
from .options import AdaptiveSchedule, SamplingOptions
from .sampler import AnswerSampler

T = TypeVar("T")


def _sample_fn(sampler: AnswerSampler, config: Any) -> Callable[..., Any]:
    """``sampler.asample``, with the framework's run ``config`` when there is one."""
    return sampler.asample if config is None else partial(sampler.asample, config=config)


@dataclass(frozen=True)
class ClusteringEmbedder:
    """The framework's embedding model for clustering; described (one probe call) on the first query only.

    >>> probe = ClusteringEmbedder(None, "embed", lambda m: {"name": "none"}, [])
    >>> probe.embed is None, probe.identity(), probe.described
    (True, {'name': 'none'}, [{'name': 'none'}])
    """

    model: Any
    method: str
    describe: Callable[[Any], dict[str, Any] | None]
    described: list[dict[str, Any] | None]

    @property
    def embed(self) -> Callable[..., Any] | None:
        """The model's batch embedding method, or ``None`` without a model."""
        return getattr(self.model, self.method) if self.model is not None else None

    def identity(self) -> dict[str, Any] | None:
        """The model's record, described on the first call only."""
        if not self.described:
            self.described.append(self.describe(self.model))
        return self.described[0]


async def asynthesize_answer_set(
    calibration: AnswerSetCalibration,
    sampler: AnswerSampler,
    question: str,
    chunks: list[ChunkInput],
    *,
    embedder: ClusteringEmbedder,
    cut_reason: str = "",
    equivalence: Any = None,
    config: Any = None,
) -> AnswerSetResult:
    """The answer set of ``question`` over ``chunks``, checked against the calibrated generator."""
    return await abuild_answer_set(
        calibration,
        question,
        chunks,
        _sample_fn(sampler, config),
        equivalence=equivalence,
        embed=embedder.embed,
        cut_reason=cut_reason,
        generator=live_generator(sampler.identity(), calibration.clustering_, embedder.identity),
    )


def single_call_sampler(
    sampler_class: type[AnswerSampler],
    llm: Any,
    sampling: SamplingOptions,
    completion_prompt: Any = None,
    chat_prompt: Any = None,
) -> AnswerSampler:
    """The adaptive synthesizers' sampler: one answer per call, one call at a time."""
    prompts = {"completion_prompt": completion_prompt, "chat_prompt": chat_prompt}
    return sampler_class.with_options(llm, replace(sampling, max_concurrency=1), n_samples=1, **prompts)


def best_first(items: Sequence[T], has_score: Callable[[T], bool], score: Callable[[T], Any]) -> list[T]:
    """A stable sort by ``score`` (highest first) when every item has one, else the input order.

    >>> best_first([("a", 0.1), ("b", 0.9)], lambda x: True, lambda x: x[1]), best_first([1, 2], lambda x: False, str)
    ([('b', 0.9), ('a', 0.1)], [1, 2])
    """
    if all(has_score(item) for item in items):
        return sorted(items, key=lambda item: -float(score(item)))
    return list(items)


async def aadaptive_from_sampler(
    sampler: AnswerSampler,
    question: str,
    texts: Sequence[str],
    ids: Sequence[str],
    *,
    schedule: AdaptiveSchedule | None,
    estimate: EstimateFn,
    config: Any = None,
) -> AdaptiveResult:
    """:func:`~.adaptive_context.aadaptive_answer` with one ``sampler`` call per round."""
    sample = _sample_fn(sampler, config)

    async def complete(context: str) -> Any:
        return (await sample(question, context))[0]

    return await aadaptive_answer(question, texts, complete, schedule=schedule, chunk_ids=ids, estimate=estimate)
