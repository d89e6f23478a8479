"""Labelling by an LLM judge over a host ranking, with scripted judges (no model, no network)."""

from __future__ import annotations

import asyncio

import pytest

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.labelling.llm_judge import LLMJudge, alabel_examples, label_examples, parse_yes_no
from conformal_rag_plugins.runtime.kv_cache import JsonCache

RANKING = [(f"c{i}", f"text of chunk {i}") for i in range(1, 9)]


def example(source: str | None = "src", answer: str = "Rollo") -> CalibrationExample:
    meta = {"source_chunk_id": source} if source else {}
    return CalibrationExample("Who led the Normans?", gold_ids=(source,) if source else (), answers=(answer,),
                              metadata=meta)  # fmt: skip


class Judge:
    """Says ``verdicts.get(chunk text, default)``; records the texts it was shown."""

    def __init__(self, verdicts: dict[str, bool | None] | None = None, default: bool | None = False) -> None:
        self.verdicts = verdicts or {}
        self.default = default
        self.seen: list[str] = []

    async def __call__(self, question: str, answer: str, text: str) -> bool | None:
        self.seen.append(text)
        return self.verdicts.get(text, self.default)


def ranking_with(source_at: int | None) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = list(RANKING)
    if source_at is not None:
        out.insert(source_at - 1, ("src", "the source chunk"))
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [("yes", True), (" Yes.", True), ("NO", False), ("no, it does not", False), ("**yes**", True),
     ("The answer is no", False), ("", None), ("maybe", None), ("nope", None), ("yesterday", None)],
)  # fmt: skip
def test_parse_yes_no(text: str, expected: bool | None) -> None:
    assert parse_yes_no(text) is expected


def test_walk_judges_in_ranking_order_and_stops_at_the_first_yes() -> None:
    judge = Judge({"text of chunk 3": True, "text of chunk 5": True})
    (ex,), report = label_examples([example()], lambda q: ranking_with(None), judge, budget=5)
    assert judge.seen == ["text of chunk 1", "text of chunk 2", "text of chunk 3"]
    assert ex.gold_ids == ("c3",)
    assert ex.metadata["label_rule"] == "judge" and ex.metadata["gold_rank"] == 3 and ex.metadata["judge_calls"] == 3
    assert ex.metadata["source_chunk_id"] == "src"  # existing metadata kept
    assert (report.by_judge, report.by_source, report.budget_exhausted, report.judge_calls) == (1, 0, 0, 3)


def test_reaching_the_source_chunk_needs_no_judge_call() -> None:
    judge = Judge()
    (ex,), report = label_examples([example()], lambda q: ranking_with(3), judge, budget=5)
    assert judge.seen == ["text of chunk 1", "text of chunk 2"]
    assert ex.gold_ids == ("src",) and ex.metadata["label_rule"] == "source" and ex.metadata["gold_rank"] == 3
    assert report.by_source == 1 and report.judge_calls == 2

    judge = Judge()
    (ex,), report = label_examples([example()], lambda q: ranking_with(1), judge, budget=5)
    assert judge.seen == [] and report.judge_calls == 0 and ex.metadata["label_rule"] == "source"


def test_budget_exhausted_is_kept_as_a_miss_with_the_source_as_gold() -> None:
    judge = Judge()
    examples = [example(), example(answer="Normandy")]
    labelled, report = label_examples(examples, lambda q: ranking_with(7), judge, budget=3)
    assert len(labelled) == 2  # never dropped
    for ex in labelled:
        assert ex.gold_ids == ("src",)
        assert ex.metadata["label_rule"] == "budget-exhausted"
        assert ex.metadata["gold_rank"] == 7  # the source's rank: a conservative score
        assert ex.metadata["judge_calls"] == 3 and ex.metadata["judge_budget"] == 3
    assert report.budget_exhausted == 2 and report.judge_calls == 6 and report.n_unlabelled == 0
    assert "2 with the budget exhausted" in report.summary()


def test_source_outside_the_ranking_has_no_rank() -> None:
    (ex,), _ = label_examples([example()], lambda q: ranking_with(None), Judge(), budget=2)
    assert ex.gold_ids == ("src",) and ex.metadata["gold_rank"] is None


def test_without_a_source_an_unresolved_question_stays_unlabelled_and_is_reported() -> None:
    (ex,), report = label_examples([example(source=None)], lambda q: ranking_with(None), Judge(), budget=2)
    assert ex.gold_ids == () and ex.metadata["label_rule"] == "budget-exhausted"
    assert report.n_unlabelled == 1 and "WARNING" in report.summary()


@pytest.mark.parametrize("budget", [0, 2])
def test_an_unresolved_question_keeps_the_gold_it_came_with(budget) -> None:
    """Hand-labelled questions (gold ids, no source chunk) are never stripped of their gold."""
    ex = CalibrationExample("Who led the Normans?", gold_ids=("c7", "c8"), answers=("Rollo",))
    by_text = CalibrationExample("Who led the Normans?", gold_texts=("Rollo led them.",), answers=("Rollo",))
    (kept, kept_text), report = label_examples([ex, by_text], lambda q: ranking_with(None), Judge(), budget=budget)
    assert kept.gold_ids == ("c7", "c8") and kept.metadata["gold_rank"] == 7
    assert kept_text.gold_texts == ("Rollo led them.",)
    assert kept.metadata["label_rule"] == "budget-exhausted" and kept.metadata["judge_calls"] == budget
    assert report.n_unlabelled == 0 and report.judge_calls == 2 * budget


def test_unparseable_outputs_count_as_no_and_are_counted() -> None:
    judge = Judge({"text of chunk 1": None, "text of chunk 2": None, "text of chunk 3": True})
    (ex,), report = label_examples([example()], lambda q: ranking_with(None), judge, budget=5)
    assert ex.gold_ids == ("c3",) and report.unparseable == 2 and report.judge_calls == 3
    assert "unparseable outputs: 2" in report.summary()


def test_chunk_without_id_is_matched_by_text() -> None:
    judge = Judge({"anonymous": True})
    (ex,), _ = label_examples([example()], lambda q: [(None, "anonymous")], judge)
    assert ex.gold_ids == () and ex.gold_texts == ("anonymous",)


def test_async_rank_concurrency_and_order() -> None:
    in_flight = peak = 0

    async def rank(question: str):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return ranking_with(2)

    examples = [CalibrationExample(f"q{i}", answers=("a",), metadata={"source_chunk_id": "src"}) for i in range(6)]
    labelled, report = asyncio.run(alabel_examples(examples, rank, Judge(), max_concurrency=2))
    assert [ex.question for ex in labelled] == [f"q{i}" for i in range(6)]
    assert peak == 2 and report.by_source == 6 and report.n == 6


def test_negative_budget_is_refused() -> None:
    with pytest.raises(CalibrationError, match="budget"):
        label_examples([example()], lambda q: [], Judge(), budget=-1)


def test_llm_judge_prompt_parsing_and_cache(tmp_path) -> None:
    prompts: list[str] = []
    replies = {"chunk A": " yes", "chunk B": " I think not sure", "chunk C": " no"}

    async def llm(prompt: str) -> str:
        prompts.append(prompt)
        return next(v for k, v in replies.items() if f"Passage: {k}\n" in prompt)

    path = tmp_path / "judge.sqlite"
    judge = LLMJudge(llm, model="fake", cache=JsonCache(path), temperature=0.0)
    ranking = [("a", "chunk B"), ("b", "chunk C"), ("c", "chunk A")]
    (ex,), report = label_examples([example()], lambda q: ranking, judge, budget=5, judge_model="fake")
    assert ex.gold_ids == ("c",) and ex.metadata["judge_model"] == "fake"
    assert report.unparseable == 1 and report.llm_calls == 3 and report.cache_hits == 0
    assert "Question: Who led the Normans?\nAnswer: Rollo\nContains the answer:" in prompts[0]

    again = LLMJudge(llm, model="fake", cache=JsonCache(path), temperature=0.0)
    (ex2,), report2 = label_examples([example()], lambda q: ranking, again, budget=5)
    assert len(prompts) == 3 and report2.llm_calls == 0 and report2.cache_hits == 3
    assert ex2.gold_ids == ("c",) and report2.unparseable == 1

    other_model = LLMJudge(llm, model="other", cache=JsonCache(path), temperature=0.0)
    asyncio.run(other_model("Who led the Normans?", "Rollo", "chunk A"))
    assert other_model.llm_calls == 1


def test_llm_judge_failed_call_is_unparseable() -> None:
    async def broken(prompt: str) -> str:
        raise TimeoutError

    judge = LLMJudge(broken, call_retries=0)
    (ex,), report = label_examples([example()], lambda q: ranking_with(2), judge)
    assert judge.failed_calls == 1 and report.unparseable == 1 and ex.metadata["label_rule"] == "source"
