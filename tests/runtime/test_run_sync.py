"""Sync entry points work inside a running event loop (a notebook cell), not only from plain scripts."""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document
from langchain_core.language_models import FakeListLLM

from conformal_rag_plugins.langchain import generate_calibration_questions
from conformal_rag_plugins.runtime.run_sync import run_sync


async def _double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


def test_run_sync_without_a_loop() -> None:
    assert run_sync(_double(21)) == 42


def test_run_sync_inside_a_running_loop() -> None:
    async def caller() -> int:
        return run_sync(_double(4))  # asyncio.run would raise here

    assert asyncio.run(caller()) == 8


def test_langchain_question_generation_inside_a_running_loop() -> None:
    llm = FakeListLLM(responses=['{"question": "Who led the Normans into Normandy?", "answer": "Rollo"}'])
    docs = [Document("The Normans were led by Rollo, a Viking chief, into Normandy.", id="d1")]

    async def caller():
        return generate_calibration_questions(docs, llm, 1, cache=False)

    examples, report = asyncio.run(caller())
    assert report.n_generated == 1
    assert [e.gold_ids for e in examples] == [("d1",)]
    assert examples[0].answers == ("Rollo",)
