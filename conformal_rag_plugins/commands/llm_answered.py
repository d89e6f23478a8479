"""Whether the LLM of a command ever answered: a dead endpoint is an error, not a report of nothing.

Every LLM call of the library is retried and then counted as a failure, so one bad call never stops
a long run. When *every* call fails (a server that is down, a wrong address or key) that rule turned
a dead endpoint into a result: ``label`` wrote 18 questions "budget-exhausted", ``evaluate --answers``
a report of coverage 0.000, both exiting 0. The checks here make it one error line (exit 2) and
write nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..answer_sets.engine import SampleFn
from ..answer_sets.sample_record import Sample
from ..core.errors import LLMUnavailableError

_ADVICE = "check that its server is running and its address, key and model name."


def check_judge_answered(report: Any, llm: str, out: str | Path) -> None:
    """Refuse a labelling run whose judge made calls that all failed, naming the last error.

    Such a run labels every question "budget-exhausted" with its source chunk as gold: written, it
    looks like a labelled file, but no judge ever saw a chunk.

    Raises
    ------
    LLMUnavailableError
        Before ``out`` is written.

    Examples
    --------
    >>> from conformal_rag_plugins.labelling.llm_judge import LabelReport
    >>> check_judge_answered(LabelReport(n=2, llm_calls=3, failed_calls=1), "local", "out.jsonl")
    >>> check_judge_answered(LabelReport(n=2, llm_calls=3, failed_calls=3, last_failure="ConnectError()"),
    ...                      "openai", "out.jsonl")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.LLMUnavailableError: The judge LLM (openai) did not answer: ...
    """
    if report.llm_calls and report.failed_calls >= report.llm_calls:
        reason = f" (last error: {report.last_failure})" if report.last_failure else ""
        raise LLMUnavailableError(
            f"The judge LLM ({llm}) did not answer: all {report.llm_calls} of its calls failed after their "
            f"retries{reason}; {_ADVICE} {out} was not written."
        )


class AnsweredSamples:
    """A :data:`SampleFn` that refuses to go on while the LLM has never answered.

    The first draw whose every sample failed, before any sample of the run was answered (a cache
    hit counts), raises :class:`LLMUnavailableError`: a dead endpoint stops at its first draw
    instead of sampling every question into empty answers. After one answer, failed draws pass
    through as before (abstentions).

    Examples
    --------
    >>> import asyncio
    >>> async def dead(question, context):
    ...     return [Sample("", failed=True)] * 2
    >>> asyncio.run(AnsweredSamples(dead, "OpenAI:gpt")("Who?", "Rollo led them."))
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.LLMUnavailableError: The LLM OpenAI:gpt did not answer: ...
    """

    def __init__(self, sample: SampleFn, llm: str) -> None:
        self.sample = sample
        self.llm = llm
        self.answered = False

    async def __call__(self, question: str, context: str) -> list[Sample]:
        drawn = await self.sample(question, context)
        if any(not s.failed for s in drawn):
            self.answered = True
        elif drawn and not self.answered:
            raise LLMUnavailableError(
                f"The LLM {self.llm} did not answer: all {len(drawn)} samples of the first question failed "
                f"after their retries (the warnings above give the provider's error); {_ADVICE} No report "
                "was written."
            )
        return drawn
