"""Issue 41 section 6, dead endpoint: ``label`` and ``evaluate --answers`` against an LLM that never answers.

Before the fix ``label`` wrote 18 questions "budget-exhausted" and ``evaluate --answers`` a report of
coverage 0.000 (with and without the pilot), both exiting 0. Now a run whose every LLM call failed is
one error line, exit 2, and writes nothing. The child-process tests use the real HTTP clients with
their retries and back-off (as ``test_generate_dead_endpoint.py``), so they are integration tests;
the checks themselves are tested in-process here too.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.errors import LLMUnavailableError
from conformal_rag_plugins.labelling.llm_judge import LLMJudge, label_examples

from .test_generate_dead_endpoint import _closed_port

# --- the checks, in-process ------------------------------------------------------------------------------------------


def test_a_judge_whose_every_call_failed_is_refused_naming_its_error() -> None:
    from conformal_rag_plugins.commands.llm_answered import check_judge_answered
    from conformal_rag_plugins.datasets.examples import CalibrationExample

    async def dead(prompt: str) -> str:
        raise ConnectionError("Connection refused")

    judge = LLMJudge(dead, call_retries=0, dead_after=None)  # the final check alone
    examples = [
        CalibrationExample(f"Who {i}?", answers=("Rollo",), metadata={"source_chunk_id": "s"}) for i in range(3)
    ]
    ranking = [("a", "Vikings raided."), ("b", "The Seine."), ("s", "Rollo led them.")]
    labelled, report = label_examples(examples, lambda q: ranking, judge, budget=2)
    assert report.llm_calls == 6 and report.failed_calls == 6 and report.by_judge == 0  # what was written
    assert {ex.metadata["label_rule"] for ex in labelled} == {"source"}  # a file no judge ever saw
    with pytest.raises(LLMUnavailableError, match=r"all 6 of its calls failed.*Connection refused.*not written"):
        check_judge_answered(report, "openai", "labelled.jsonl")


def test_a_dead_judge_stops_the_run_after_its_first_failed_calls() -> None:
    """By default the judge gives up after 3 failed calls with no answer, not after every question's budget."""
    from conformal_rag_plugins.datasets.examples import CalibrationExample

    calls: list[str] = []

    async def dead(prompt: str) -> str:
        calls.append(prompt)
        raise ConnectionError("Connection refused")

    examples = [
        CalibrationExample(f"Who {i}?", answers=("Rollo",), metadata={"source_chunk_id": "s"}) for i in range(50)
    ]
    ranking = [("a", "Vikings raided."), ("b", "The Seine."), ("s", "Rollo led them.")]
    with pytest.raises(LLMUnavailableError, match=r"did not answer: its first 3 calls failed.*Connection refused"):
        label_examples(examples, lambda q: ranking, LLMJudge(dead, call_retries=0), budget=2, max_concurrency=1)
    assert len(calls) <= 4  # 3, and at most one more already under way (was 100: every question's budget)


def test_a_judge_that_answers_first_keeps_going_through_later_failures() -> None:
    from conformal_rag_plugins.datasets.examples import CalibrationExample

    replies = iter(["yes"] + ["error"] * 20)

    async def flaky(prompt: str) -> str:
        reply = next(replies)
        if reply == "error":
            raise ConnectionError("reset")
        return reply

    examples = [CalibrationExample(f"Who {i}?", answers=("Rollo",)) for i in range(5)]
    ranking = [("a", "Vikings raided."), ("b", "The Seine.")]
    labelled, report = label_examples(examples, lambda q: ranking, LLMJudge(flaky, call_retries=0), budget=2)
    assert len(labelled) == 5 and report.by_judge == 1 and report.failed_calls == 8


def test_a_judge_that_answered_once_is_not_refused() -> None:
    from conformal_rag_plugins.commands.llm_answered import check_judge_answered
    from conformal_rag_plugins.labelling.llm_judge import LabelReport

    check_judge_answered(LabelReport(n=3, llm_calls=6, failed_calls=5), "openai", "labelled.jsonl")
    check_judge_answered(LabelReport(n=3, llm_calls=0, failed_calls=0), "openai", "labelled.jsonl")  # all cached


def test_sampling_stops_at_the_first_draw_when_the_llm_never_answered() -> None:
    from conformal_rag_plugins.commands.llm_answered import AnsweredSamples

    calls: list[str] = []

    async def dead(question: str, context: str) -> list[Sample]:
        calls.append(question)
        return [Sample("", failed=True)] * 3

    sample = AnsweredSamples(dead, "OpenAI:gpt")
    with pytest.raises(LLMUnavailableError, match="did not answer"):
        asyncio.run(sample("Who?", "Rollo led them."))
    assert calls == ["Who?"]


def test_failed_draws_after_an_answer_are_abstentions_as_before() -> None:
    from conformal_rag_plugins.commands.llm_answered import AnsweredSamples

    answers = iter([[Sample("Rollo"), Sample("", failed=True)], [Sample("", failed=True)] * 2])

    async def flaky(question: str, context: str) -> list[Sample]:
        return next(answers)

    sample = AnsweredSamples(flaky, "OpenAI:gpt")
    assert [s.text for s in asyncio.run(sample("Who?", "c"))] == ["Rollo", ""]
    assert all(s.failed for s in asyncio.run(sample("Who?", "c")))


# --- the commands, in a child process against a closed port ---------------------------------------------------------

PASSAGES = [f"Document {i} says the Normans founded town {i} in the year {900 + i} under Rollo." for i in range(12)]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    corpus, qa = tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(PASSAGES)))
    qa.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": f"When was town {i} founded?",
                    "answers": [str(900 + i)],
                    "gold_ids": [f"d{i}"],
                }
            )
            + "\n"
            for i in range(12)
        )
    )
    return corpus, qa


def _run_dead(argv: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1",
        "OPENAI_API_KEY": "sk-test",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "CONFORMAL_RAG_CACHE": os.environ.get("CONFORMAL_RAG_CACHE", str(tmp_path / "cache")),
    }
    env.pop("CONFORMAL_RAG_OPENAI_COMPLETION", None)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "conformal_rag_plugins.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    return proc, time.monotonic() - start


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert lines and "Traceback" not in proc.stderr, proc.stderr
    return lines[-1]


@pytest.mark.integration
def test_label_against_a_dead_endpoint_fails_with_one_line_and_writes_nothing(tmp_path, files) -> None:
    corpus, qa = files
    out = tmp_path / "labelled.jsonl"
    argv = ["label", "--corpus", str(corpus), "--questions", str(qa), "--out", str(out), "--llm", "openai"]
    proc, elapsed = _run_dead([*argv, "--budget", "1", "--pool-size", "5", "--no-cache", "--quiet"], tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    line = _last_line(proc)
    assert line.startswith("conformal-rag: error: The judge LLM (") and "did not answer" in line, line
    assert "Connection" in line and "was not written" in line
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert elapsed < 200, elapsed


@pytest.mark.integration
@pytest.mark.parametrize("pilot", ["--no-pilot", "--pilot=2"])
def test_evaluate_answers_against_a_dead_endpoint_fails_with_one_line(tmp_path, files, pilot) -> None:
    corpus, qa = files
    out = tmp_path / "report.json"
    argv = ["evaluate", "--answers", "--corpus", str(corpus), "--qa", str(qa), "--alpha", "0.5", "--llm", "openai"]
    argv += ["--samples", "2", "--max-questions", "10", "--answer-pool", "2", "--trials", "2", pilot, "--quiet"]
    proc, elapsed = _run_dead([*argv, "--json", str(out)], tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    line = _last_line(proc)
    assert line.startswith("conformal-rag: error: The LLM ") and "did not answer" in line, line
    assert not out.exists()
    assert elapsed < 150, elapsed  # the first draw and its retries, not every question's
