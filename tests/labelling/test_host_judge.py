"""Labelling written once: both adapters share HostJudge / QuestionWriter, and the option objects reach the engines."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CalibrationExample, CorpusEntry
from conformal_rag_plugins.labelling.host_judge import HostJudge
from conformal_rag_plugins.labelling.llm import LLMTask
from conformal_rag_plugins.labelling.options import JudgeOptions, QuestionOptions
from conformal_rag_plugins.labelling.question_writer import QuestionWriter
from conformal_rag_plugins.langchain import judge_labels as lc_judge
from conformal_rag_plugins.langchain import question_gen as lc_gen
from conformal_rag_plugins.llamaindex import judge_labels as li_judge
from conformal_rag_plugins.llamaindex import question_gen as li_gen

PASSAGE = "The harbour of Zorvik was rebuilt by the engineer Talmar after the great storm."
GOOD = '{"question": "Who rebuilt the harbour of Zorvik?", "answer": "Talmar"}'


def plain_reader(llm, prompts, completion_prompt=None, chat_prompt=None):
    return LLMTask.plain(llm, prompts.few_shot, model="plain")


PLAIN_JUDGE = HostJudge(read_llm=plain_reader, read_host=lambda host, pool_size: lambda question: host[:pool_size])
PLAIN_WRITER = QuestionWriter(read_llm=plain_reader, read_chunks=list)


class Peak:
    """An async LLM that records how many calls are in flight at once and how many were made."""

    def __init__(self, output: str, fail: bool = False) -> None:
        self.output, self.fail = output, fail
        self.in_flight = self.peak = self.calls = 0

    async def __call__(self, prompt: str) -> str:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        if self.fail:
            raise RuntimeError("down")
        return self.output


@pytest.mark.parametrize(
    ("module", "name", "cls"),
    [
        (li_judge, "label_with_judge", HostJudge),
        (lc_judge, "label_with_judge", HostJudge),
        (li_judge, "alabel_with_judge", HostJudge),
        (lc_judge, "alabel_with_judge", HostJudge),
        (li_gen, "generate_calibration_questions", QuestionWriter),
        (lc_gen, "generate_calibration_questions", QuestionWriter),
        (li_gen, "agenerate_calibration_questions", QuestionWriter),
        (lc_gen, "agenerate_calibration_questions", QuestionWriter),
    ],
)
def test_both_adapters_call_the_one_implementation(module, name, cls) -> None:
    fn = getattr(module, name)
    assert fn.__func__ is getattr(cls, name)
    assert len(inspect.signature(fn).parameters) <= 8


def test_option_defaults_are_the_library_defaults_and_frozen() -> None:
    judge, questions = JudgeOptions(), QuestionOptions()
    assert (judge.max_concurrency, judge.timeout, judge.call_retries, judge.progress) == (4, 60.0, 2, False)
    q = questions
    assert (q.max_retries, q.max_concurrency, q.timeout, q.call_retries, q.min_words) == (2, 4, 120.0, 2, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        judge.max_concurrency = 1  # type: ignore[misc]


@pytest.mark.parametrize(("max_concurrency", "expected_peak"), [(1, 1), (3, 3)])
def test_judge_options_bound_the_concurrency(max_concurrency: int, expected_peak: int) -> None:
    ranking = [(f"c{i}", f"Passage {i} about nothing.") for i in range(3)]
    examples = [CalibrationExample(f"Question {i}?", answers=("x",)) for i in range(6)]
    llm = Peak("no")
    options = JudgeOptions(max_concurrency=max_concurrency)
    labelled, report = PLAIN_JUDGE.label_with_judge(ranking, examples, llm, budget=1, pool_size=3, cache=False,
                                                    options=options)  # fmt: skip
    assert llm.peak == expected_peak and report.judge_calls == 6 and len(labelled) == 6


@pytest.mark.parametrize(("call_retries", "calls"), [(0, 1), (2, 3)])
def test_judge_options_set_the_retries_per_call(call_retries: int, calls: int) -> None:
    llm = Peak("yes", fail=True)
    ex = CalibrationExample("Who?", answers=("Talmar",))
    options = JudgeOptions(call_retries=call_retries, timeout=5.0)
    (labelled,), report = PLAIN_JUDGE.label_with_judge([("c1", PASSAGE)], [ex], llm, pool_size=1, cache=False,
                                                       options=options)  # fmt: skip
    assert llm.calls == calls and report.unparseable == 1 and labelled.metadata["judge_model"] == "plain"


def test_question_options_reach_generation() -> None:
    chunks = [CorpusEntry("z", PASSAGE)]
    examples, report = PLAIN_WRITER.generate_calibration_questions(chunks, Peak(GOOD), 1, cache=False)
    assert examples[0].gold_ids == ("z",) and report.model == "plain" and report.llm_calls == 1

    bad = Peak("not json")
    _, report = PLAIN_WRITER.generate_calibration_questions(
        chunks, bad, 1, cache=False, options=QuestionOptions(max_retries=0)
    )
    assert bad.calls == 1 and report.n_generated == 0
    with pytest.raises(CalibrationError, match="at least 50 words"):
        PLAIN_WRITER.generate_calibration_questions(chunks, Peak(GOOD), 1, cache=False,
                                                    options=QuestionOptions(min_words=50))  # fmt: skip
