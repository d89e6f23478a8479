"""Framework-neutral adaptive RAG inside a conformal set (geometric context growth).

Each round prompts with the top ``schedule[r]`` chunks of the set (overlapping prompts) and stops
at the first answer that is not a "no answer"; if every round declines, the result abstains after
the LLM has seen the whole set.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.adaptive_schedule import geometric_schedule, is_no_answer
from ..core.errors import ConformalError
from .options import AdaptiveSchedule
from .prompts import IDK
from .sample_record import Sample

CompleteFn = Callable[[str], Awaitable[Sample]]
# (context, sample) -> (prompt_tokens, completion_tokens, source) when the provider reported no usage.
EstimateFn = Callable[[str, Sample], tuple[int, int, str]]

DEFAULT_SEPARATOR = "\n"
# The usual rule of thumb for English text with BPE tokenizers (about four characters per token).
CHARS_PER_TOKEN = 4.0


def join_chunks(chunks: Sequence[str], separator: str = DEFAULT_SEPARATOR) -> str:
    """The context string of one round: the chunks in score order, joined.

    >>> join_chunks(["Rollo led the Norse.", "Paris is in France."])
    'Rollo led the Norse.\\nParis is in France.'
    """
    return separator.join(chunks)


def approx_token_count(text: str) -> int:
    """Approximate token count, ``ceil(len(text) / 4)``: the last resort, close for English BPE, off for other scripts.

    >>> approx_token_count("Rollo led the Norse.")
    5
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


@dataclass(frozen=True)
class AdaptiveRound:
    """One round: context size, answer, whether it declined, its tokens and their ``token_source``.

    ``token_source``: ``"reported"`` (provider), the estimator's label, or ``"none"`` for a failed call.
    """

    size: int
    answer: str
    no_answer: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_source: str = "reported"
    failed: bool = False


@dataclass
class AdaptiveResult:
    """Outcome of adaptive answering over one conformal set (tokens summed over rounds).

    ``abstained`` only after a round that showed the whole set; ``token_source`` may be ``"mixed"``.
    """

    question: str
    answer: str
    abstained: bool
    rounds: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    chunks_used: int
    schedule: list[int]
    round_answers: list[str]
    token_source: str = "none"
    chunk_ids: list[str] = field(default_factory=list)
    history: list[AdaptiveRound] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens over all rounds."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (rounds in ``history`` as dicts)."""
        return asdict(self)


def _accounting(sample: Sample, context: str, estimate: EstimateFn | None) -> tuple[int, int, str]:
    if sample.failed:
        return 0, 0, "none"
    if sample.prompt_tokens or sample.completion_tokens or estimate is None:
        return sample.prompt_tokens, sample.completion_tokens, "reported"
    return estimate(context, sample)


def _overall_source(history: Sequence[AdaptiveRound]) -> str:
    sources = {r.token_source for r in history if r.token_source != "none"}
    if not sources:
        return "none"
    return sources.pop() if len(sources) == 1 else "mixed"


async def aadaptive_answer(
    question: str,
    chunks: Sequence[str],
    complete: CompleteFn,
    *,
    schedule: AdaptiveSchedule | None = None,
    chunk_ids: Sequence[str] | None = None,
    estimate: EstimateFn | None = None,
) -> AdaptiveResult:
    """Answer with a geometrically growing context over the conformal set ``chunks`` (best first).

    ``complete(context) -> Sample`` is one LLM call per round; ``estimate(context, sample)`` gives
    token counts when the provider reported none. An empty ``chunks`` abstains with no call.

    >>> import asyncio
    >>> async def complete(context):
    ...     return Sample("Rollo" if "Rollo" in context else "I don't know", 10, 1)
    >>> chunks = ["Paris is in France.", "Rollo led the Norse.", "Far away."]
    >>> result = asyncio.run(aadaptive_answer("Who led the Norse?", chunks, complete))
    >>> result.answer, result.rounds, result.chunks_used, result.round_answers
    ('Rollo', 2, 2, ["I don't know", 'Rollo'])
    >>> result.prompt_tokens, result.schedule
    (20, [1, 2, 3])
    """
    ids = None if chunk_ids is None else [str(i) for i in chunk_ids]
    if ids is not None and len(ids) != len(chunks):
        raise ConformalError(f"chunk_ids has {len(ids)} ids for {len(chunks)} chunks.")
    plan = schedule or AdaptiveSchedule()
    sizes = geometric_schedule(len(chunks), initial=plan.initial, factor=plan.factor, max_rounds=plan.max_rounds)
    history: list[AdaptiveRound] = []
    answer: str | None = None
    for size in sizes:
        context = join_chunks(chunks[:size], plan.separator)
        sample = await complete(context)
        prompt_tokens, completion_tokens, source = _accounting(sample, context, estimate)
        declined = sample.failed or is_no_answer(sample.text)
        history.append(
            AdaptiveRound(size, sample.text, declined, prompt_tokens, completion_tokens, source, sample.failed)
        )
        if not declined:
            answer = sample.text
            break
    used = history[-1].size if history else 0
    return AdaptiveResult(
        question=question,
        answer=IDK if answer is None else answer,
        abstained=answer is None,
        rounds=len(history),
        llm_calls=len(history),
        prompt_tokens=sum(r.prompt_tokens for r in history),
        completion_tokens=sum(r.completion_tokens for r in history),
        chunks_used=used,
        schedule=sizes,
        round_answers=[r.answer for r in history],
        token_source=_overall_source(history),
        chunk_ids=[] if ids is None else ids[:used],
        history=history,
    )
