"""Adaptive answering over a conformal set with scripted fake LLM calls (generation.adaptive_context)."""

from __future__ import annotations

import asyncio
import json

import pytest

from conformal_rag_plugins.answer_sets.adaptive_context import (
    AdaptiveResult,
    aadaptive_answer,
    approx_token_count,
    join_chunks,
)
from conformal_rag_plugins.answer_sets.options import AdaptiveSchedule
from conformal_rag_plugins.answer_sets.prompts import IDK
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.errors import ConformalError

CHUNKS = [f"chunk {i} text." for i in range(10)]


class Script:
    """A fake ``complete``: answers from a list, records every context it is shown."""

    def __init__(self, answers: list[Sample | str]) -> None:
        self.answers = list(answers)
        self.contexts: list[str] = []

    async def __call__(self, context: str) -> Sample:
        self.contexts.append(context)
        got = self.answers[len(self.contexts) - 1]
        return got if isinstance(got, Sample) else Sample(got, 100 * len(self.contexts), 3)


def run(chunks, script, *, chunk_ids=None, estimate=None, **schedule) -> AdaptiveResult:
    plan = AdaptiveSchedule(**schedule)
    return asyncio.run(aadaptive_answer("Who?", chunks, script, schedule=plan, chunk_ids=chunk_ids, estimate=estimate))


def test_stops_at_the_first_real_answer() -> None:
    script = Script(["I don't know", "Not in the context.", "Rollo", "never asked"])
    result = run(CHUNKS, script)
    assert result.answer == "Rollo" and not result.abstained
    assert result.rounds == result.llm_calls == len(script.contexts) == 3
    assert result.schedule == [1, 2, 4, 8, 10]
    assert result.chunks_used == 4
    assert result.round_answers == ["I don't know", "Not in the context.", "Rollo"]
    assert [r.no_answer for r in result.history] == [True, True, False]


def test_every_round_sees_exactly_the_top_chunks_in_order() -> None:
    script = Script([IDK] * 5)
    result = run(CHUNKS, script, initial=1, factor=2.0)
    assert [r.size for r in result.history] == result.schedule == [1, 2, 4, 8, 10]
    for size, context in zip(result.schedule, script.contexts, strict=True):
        assert context == "\n".join(CHUNKS[:size])  # overlapping prompts: the best chunks are always there
        assert context.split("\n") == CHUNKS[:size]


def test_custom_separator_and_schedule() -> None:
    script = Script([IDK, IDK, "Paris"])
    result = run(CHUNKS, script, initial=2, factor=3.0, separator="\n\n")
    assert result.schedule == [2, 6, 10]
    assert script.contexts == ["\n\n".join(CHUNKS[:2]), "\n\n".join(CHUNKS[:6]), "\n\n".join(CHUNKS)]
    assert result.answer == "Paris" and result.chunks_used == 10


def test_abstention_shows_the_whole_conformal_set() -> None:
    script = Script(["I don't know", "unknown", "N/A", "None", "Cannot be determined"])
    result = run(CHUNKS, script)
    assert result.abstained and result.answer == IDK
    assert result.rounds == 5 and result.chunks_used == len(CHUNKS)
    assert script.contexts[-1] == join_chunks(CHUNKS)


def test_max_rounds_jumps_to_the_whole_set() -> None:
    script = Script([IDK, IDK])
    result = run(CHUNKS, script, max_rounds=2)
    assert result.schedule == [1, 10]
    assert result.abstained and result.chunks_used == 10 and result.llm_calls == 2


def test_token_and_call_accounting() -> None:
    script = Script([Sample(IDK, 50, 4), Sample(IDK, 90, 4), Sample("Rollo", 170, 2)])
    result = run(CHUNKS, script)
    assert result.llm_calls == 3
    assert result.prompt_tokens == 50 + 90 + 170
    assert result.completion_tokens == 4 + 4 + 2
    assert result.total_tokens == 320
    assert result.token_source == "reported"
    assert [(r.prompt_tokens, r.completion_tokens) for r in result.history] == [(50, 4), (90, 4), (170, 2)]


def test_estimate_fills_in_missing_usage_only() -> None:
    script = Script([Sample(IDK), Sample("Rollo", 30, 2)])
    calls = []

    def estimate(context: str, sample: Sample) -> tuple[int, int, str]:
        calls.append((context, sample.text))
        return approx_token_count(context), approx_token_count(sample.text), "approximate"

    result = run(CHUNKS, script, estimate=estimate)
    assert calls == [(CHUNKS[0], IDK)]  # only the round without reported usage
    assert result.history[0].token_source == "approximate"
    assert result.history[0].prompt_tokens == approx_token_count(CHUNKS[0])
    assert result.history[1].token_source == "reported"
    assert result.token_source == "mixed"
    assert result.prompt_tokens == approx_token_count(CHUNKS[0]) + 30


def test_failed_call_counts_as_no_answer_without_tokens() -> None:
    script = Script([Sample("", failed=True), Sample("Rollo", 20, 1)])
    result = run(CHUNKS, script, estimate=lambda c, s: (999, 999, "approximate"))
    assert result.answer == "Rollo" and result.rounds == 2
    assert result.history[0].failed and result.history[0].no_answer
    assert result.history[0].token_source == "none" and result.history[0].prompt_tokens == 0
    assert result.prompt_tokens == 20 and result.token_source == "reported"


def test_empty_set_abstains_without_calling() -> None:
    script = Script([])
    result = run([], script)
    assert result.abstained and result.answer == IDK
    assert result.llm_calls == result.rounds == result.chunks_used == 0
    assert result.schedule == [] and result.round_answers == [] and script.contexts == []
    assert result.prompt_tokens == result.completion_tokens == 0 and result.token_source == "none"


def test_chunk_ids_of_the_final_context_and_json_dict() -> None:
    ids = [f"c{i}" for i in range(10)]
    result = run(CHUNKS, Script([IDK, "Rollo"]), chunk_ids=ids)
    assert result.chunk_ids == ["c0", "c1"]
    data = json.loads(json.dumps(result.to_dict()))
    assert data["answer"] == "Rollo" and data["rounds"] == 2 and data["schedule"] == [1, 2, 4, 8, 10]
    assert data["history"][0] == {
        "size": 1,
        "answer": IDK,
        "no_answer": True,
        "prompt_tokens": 100,
        "completion_tokens": 3,
        "token_source": "reported",
        "failed": False,
    }
    with pytest.raises(ConformalError, match="chunk_ids"):
        run(CHUNKS, Script([]), chunk_ids=ids[:3])


def test_bad_schedule_parameters_raise_before_any_call() -> None:
    script = Script(["Rollo"])
    with pytest.raises(ConformalError, match="factor"):
        run(CHUNKS, script, factor=1.0)
    assert script.contexts == []
