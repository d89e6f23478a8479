"""Question generation from chunks with scripted fake LLM completions (no model, no network)."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/runtime/progress.py
#   conformal_rag_plugins/runtime/retry.py

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest

from conformal_rag_plugins.core.errors import CalibrationError, LLMUnavailableError
from conformal_rag_plugins.datasets.examples import CorpusEntry, load_examples, save_examples
from conformal_rag_plugins.labelling.chunk_records import Chunk
from conformal_rag_plugins.labelling.llm import LLMTask
from conformal_rag_plugins.labelling.options import QuestionOptions
from conformal_rag_plugins.labelling.prompts import QUESTION_FEW_SHOT_TEMPLATE
from conformal_rag_plugins.labelling.question_filters import copies_chunk, looks_wrong_language
from conformal_rag_plugins.labelling.question_gen import (
    agenerate_questions,
    document_of,
    sample_chunks,
    stratified_order,
)
from conformal_rag_plugins.runtime.kv_cache import JsonCache

NORMANS = (
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
    "in France. They were descended from Norse raiders led by their leader Rollo."
)
SEINE = "Rollo agreed to defend the lower Seine valley against other Viking raiders in the year 911."
GOOD = '{"question": "Who led the Norse raiders?", "answer": "Rollo"}'


class Scripted:
    """``complete(prompt)``: the next scripted output for the passage in the prompt; counts calls."""

    def __init__(self, scripts: dict[str, list[str] | str], *, default: str | None = None) -> None:
        self.scripts = {k: [v] if isinstance(v, str) else list(v) for k, v in scripts.items()}
        self.default = default
        self.calls: Counter[str] = Counter()
        self.prompts: list[str] = []

    @staticmethod
    def passage(prompt: str) -> str:
        return re.findall(r"Passage: (.*)\n", prompt)[-1]

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        passage = self.passage(prompt)
        key = next(k for k in [*self.scripts, passage] if k == passage or k in passage)
        n = self.calls[key]
        self.calls[key] += 1
        if key not in self.scripts:
            if self.default is None:
                raise AssertionError(f"unexpected passage {passage!r}")
            return self.default
        outputs = self.scripts[key]
        return outputs[min(n, len(outputs) - 1)]

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def run(chunks, complete, n, *, model="unknown", prompt=QUESTION_FEW_SHOT_TEMPLATE, temperature=None, seed=0,
        topic=None, cache=None, **options):  # fmt: skip
    """``complete`` as an ``LLMTask`` with ``model``/``prompt``/``temperature``; the rest are ``QuestionOptions``."""
    options.setdefault("call_retries", 0)
    task = LLMTask.plain(complete, prompt, model=model, temperature=temperature)
    return asyncio.run(
        agenerate_questions(chunks, task, n, seed=seed, topic=topic, cache=cache, options=QuestionOptions(**options))
    )


def docs_corpus(sizes: dict[str, int]) -> list[Chunk]:
    return [
        Chunk(f"{doc}::chunk{i}", f"passage {i} of document {doc} with enough words", parent_id=doc)
        for doc, k in sizes.items()
        for i in range(k)
    ]


# --- sampling ------------------------------------------------------------------------------------------------------


def test_every_document_is_hit_before_any_gets_a_second_chunk() -> None:
    chunks = docs_corpus({"a": 1, "b": 3, "c": 5, "d": 2})
    for seed in range(5):
        order = stratified_order(chunks, seed)
        assert len(order) == len(chunks)
        assert {document_of(c) for c in order[:4]} == {"a", "b", "c", "d"}
        # at every prefix, documents that still have chunks left differ by at most one chunk
        for k in range(1, len(order) + 1):
            counts = Counter(document_of(c) for c in order[:k])
            open_docs = [d for d, size in {"a": 1, "b": 3, "c": 5, "d": 2}.items() if counts[d] < size]
            if open_docs:
                assert max(counts.values()) - min(counts[d] for d in open_docs) <= 1


def test_sampling_is_seeded() -> None:
    chunks = docs_corpus({"a": 4, "b": 4, "c": 4})
    first = [c.id for c in sample_chunks(chunks, 6, seed=7)]
    assert first == [c.id for c in sample_chunks(chunks, 6, seed=7)]
    assert any([c.id for c in sample_chunks(chunks, 6, seed=s)] != first for s in range(8))


def test_plain_entries_are_their_own_documents() -> None:
    entries = [CorpusEntry(f"e{i}", "a passage with five words") for i in range(3)]
    assert sorted(document_of(c) for c in sample_chunks(entries, 3)) == ["e0", "e1", "e2"]


def test_corpus_too_small_states_the_achievable_number() -> None:
    chunks = [*docs_corpus({"a": 2}), Chunk("tiny", "too short", parent_id="tiny")]
    with pytest.raises(CalibrationError, match=r"at most 2 question\(s\)") as info:
        sample_chunks(chunks, 3)
    assert "2 usable chunk(s) (of 3" in str(info.value)
    with pytest.raises(CalibrationError, match="at most 2"):
        run(chunks, Scripted({}), 3)


def test_duplicate_chunk_ids_are_refused() -> None:
    with pytest.raises(CalibrationError, match="unique"):
        stratified_order([CorpusEntry("x", "one two three four five")] * 2)


# --- filters -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("I am sorry, I cannot write JSON.", "not_json"),
        ('{"question": "   ", "answer": "Rollo"}', "empty_question"),
        ('{"answer": "Rollo"}', "empty_question"),
        ('{"question": "Qui dirigeait les raiders nordiques?", "answer": "Rollo"}', "wrong_language"),
        ('{"question": "诺曼人的首领是谁？", "answer": "Rollo"}', "wrong_language"),
        ('{"question": "They were descended from Norse raiders led by their leader Rollo.", "answer": "Rollo"}',
         "copies_chunk"),
        ('{"question": "Who led the Norse raiders?", "answer": "Napoleon"}', "answer_not_in_chunk"),
        ('{"question": "Who led the Norse raiders?", "answer": ""}', "answer_not_in_chunk"),
    ],
)  # fmt: skip
def test_each_filter_is_counted(output: str, reason: str) -> None:
    llm = Scripted({NORMANS: output})
    examples, report = run([CorpusEntry("n", NORMANS)], llm, 1, max_retries=0)
    assert examples == []
    assert report.rejected == {reason: 1}
    assert report.skipped == {reason: 1}
    assert report.n_generated == 0 and report.llm_calls == 1
    assert reason in report.summary()


def test_llm_errors_are_counted_once_the_llm_has_answered() -> None:
    """A partly failing LLM: the failed calls are ``llm_error`` rejections and the run goes on."""
    scripted = Scripted({"Normans": GOOD})

    async def flaky(prompt: str) -> str:
        if "Seine" in Scripted.passage(prompt):
            raise RuntimeError("server down")
        return await scripted(prompt)

    chunks = [CorpusEntry("n", NORMANS), CorpusEntry("s", SEINE)]
    examples, report = run(chunks, flaky, 2, max_retries=1, max_concurrency=1, seed=0)  # Normans first
    assert [e.gold_ids for e in examples] == [("n",)]
    assert report.rejected == {"llm_error": 2} and report.skipped == {"llm_error": 1}


def test_an_llm_that_never_answers_fails_at_its_first_failed_call() -> None:
    """Issue 33 item 6: a dead endpoint was retried on every chunk and reported as 0 questions, not an error."""
    calls = []

    async def broken(prompt: str) -> str:
        calls.append(prompt)
        raise ConnectionError("connection refused")

    chunks = [CorpusEntry(f"n{i}", NORMANS + f" Copy {i}.") for i in range(5)]
    with pytest.raises(LLMUnavailableError, match=r"did not answer \(after 2 attempts: ConnectionError"):
        run(chunks, broken, 3, model="m", max_retries=2, call_retries=1, max_concurrency=1)
    assert len(calls) == 2  # one call and its retry; no other chunk was tried


def test_copy_rule_catches_a_long_shared_run_but_not_a_real_question() -> None:
    assert copies_chunk("In the 10th and 11th centuries gave their name to Normandy a region, who?", NORMANS)
    assert not copies_chunk("Which region in France did the Normans give their name to?", NORMANS)


def test_language_rule_keeps_short_and_english_questions() -> None:
    assert not looks_wrong_language("Rollo's origin?", NORMANS)  # too short to judge
    assert not looks_wrong_language("Which region did the Normans name?", NORMANS)
    assert looks_wrong_language("Welche Region benannten die Normannen?", NORMANS)


def test_accepted_question_becomes_a_calibration_example(tmp_path) -> None:
    llm = Scripted({NORMANS: GOOD})
    examples, report = run(
        [Chunk("Normans#0::chunk0", NORMANS, parent_id="Normans#0")], llm, 1, model="fake:1", topic="history"
    )
    (ex,) = examples
    assert ex.question == "Who led the Norse raiders?"
    assert ex.answers == ("Rollo",) and ex.gold_ids == ("Normans#0::chunk0",)
    assert ex.metadata == {
        "source_chunk_id": "Normans#0::chunk0",
        "source_document_id": "Normans#0",
        "generated_by": "fake:1",
        "topic": "history",
        "generation_attempt": 0,
    }
    assert report.n_generated == 1 and report.rejected == {} and report.skipped == {}
    save_examples(examples, tmp_path / "q.jsonl")
    (back,) = load_examples(tmp_path / "q.jsonl")
    assert back == ex and back.metadata == ex.metadata


def test_retries_then_success_records_the_attempt() -> None:
    llm = Scripted({NORMANS: ["not json", '{"question": ""}', GOOD]})
    examples, report = run([CorpusEntry("n", NORMANS)], llm, 1, max_retries=2)
    assert [ex.metadata["generation_attempt"] for ex in examples] == [2]
    assert report.rejected == {"not_json": 1, "empty_question": 1} and report.skipped == {}
    assert report.llm_calls == 3


def test_retries_then_skip_and_replace_the_chunk() -> None:
    llm = Scripted({NORMANS: "nothing useful", SEINE: '{"question": "When did Rollo agree?", "answer": "911"}'})
    chunks = [CorpusEntry("n", NORMANS), CorpusEntry("s", SEINE)]
    seed = next(s for s in range(20) if stratified_order(chunks, s)[0].id == "n")  # the bad chunk comes first
    examples, report = run(chunks, llm, 1, max_retries=2, seed=seed)
    assert llm.calls[NORMANS] == 3 and llm.calls[SEINE] == 1
    assert [ex.gold_ids for ex in examples] == [("s",)]
    assert report.rejected == {"not_json": 3} and report.skipped == {"not_json": 1}
    assert report.n_chunks_tried == 2 and report.llm_calls == 4


def test_duplicates_are_dropped_and_replaced() -> None:
    texts = {f"doc{i}": f"Document {i} says that Rollo led the Normans in {900 + i}." for i in range(3)}
    llm = Scripted(
        {
            texts["doc0"]: '{"question": "Who led the Normans?", "answer": "Rollo"}',
            texts["doc1"]: '{"question": "who led the normans", "answer": "Rollo"}',
            texts["doc2"]: '{"question": "When did Rollo lead the Normans?", "answer": "902"}',
        }
    )
    chunks = [CorpusEntry(k, v) for k, v in texts.items()]
    seed = next(s for s in range(50) if {c.id for c in stratified_order(chunks, s)[:2]} == {"doc0", "doc1"})
    examples, report = run(chunks, llm, 2, seed=seed)
    assert len(examples) == 2
    assert report.rejected == {"duplicate": 1} and report.skipped == {"duplicate": 1}
    first = stratified_order(chunks, seed)[0].id  # the earlier of the two duplicates is kept
    assert [ex.gold_ids[0] for ex in examples] == [first, "doc2"]


def test_short_of_questions_when_the_corpus_runs_out() -> None:
    llm = Scripted({NORMANS: GOOD, SEINE: "bad"})
    examples, report = run([CorpusEntry("n", NORMANS), CorpusEntry("s", SEINE)], llm, 2, max_retries=0)
    assert len(examples) == 1 and report.n_generated == 1
    assert "WARNING: only 1 questions" in report.summary()


def test_topic_and_prompt_overrides() -> None:
    llm = Scripted({NORMANS: GOOD})
    run([CorpusEntry("n", NORMANS)], llm, 1, topic="medieval history")
    assert "The question must be about medieval history. " in llm.prompts[0]
    assert "Passage: " + NORMANS in llm.prompts[0]

    llm = Scripted({NORMANS: GOOD})
    run([CorpusEntry("n", NORMANS)], llm, 1, prompt='Topic {topic}. Passage: {context}\nJSON {"like": "this"}:')
    assert llm.prompts == ["Topic . Passage: " + NORMANS + '\nJSON {"like": "this"}:']

    llm = Scripted({}, default=GOOD)
    run([CorpusEntry("n", NORMANS)], llm, 1, prompt=lambda v: f"Passage: {v['context'][:20]}\n")
    assert llm.prompts == [f"Passage: {NORMANS[:20]}\n"]


def test_cache_resumes_without_llm_calls(tmp_path) -> None:
    chunks = docs_corpus({"a": 3, "b": 3})
    path = tmp_path / "llm.sqlite"

    class PerPassage(Scripted):  # a distinct valid question per passage
        async def __call__(self, prompt: str) -> str:
            await super().__call__(prompt)
            return f'{{"question": "What is in {self.passage(prompt)}?", "answer": "enough words"}}'

    first = PerPassage({}, default="")
    ex1, rep1 = run(chunks, first, 2, cache=JsonCache(path), temperature=0.7, model="m")
    assert first.total == 2 and rep1.llm_calls == 2 and rep1.cache_hits == 0

    again = PerPassage({}, default="")
    ex2, rep2 = run(chunks, again, 2, cache=JsonCache(path), temperature=0.7, model="m")
    assert again.total == 0 and rep2.llm_calls == 0 and rep2.cache_hits == 2
    assert [e.to_dict() for e in ex2] == [e.to_dict() for e in ex1]

    # resuming a larger request only asks for what is missing
    more = PerPassage({}, default="")
    ex3, rep3 = run(chunks, more, 4, cache=JsonCache(path), temperature=0.7, model="m")
    assert more.total == 2 and rep3.cache_hits == 2 and [e.id for e in ex3[:2]] == [e.id for e in ex1]

    # another temperature or model is another key
    other = PerPassage({}, default="")
    run(chunks, other, 2, cache=JsonCache(path), temperature=1.0, model="m")
    assert other.total == 2


def test_concurrency_is_limited() -> None:
    in_flight = peak = 0

    async def slow(prompt: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return f'{{"question": "What is in {Scripted.passage(prompt)}?", "answer": "enough words"}}'

    examples, _ = run(docs_corpus({"a": 4, "b": 4}), slow, 8, max_concurrency=3)
    assert len(examples) == 8 and peak == 3


def test_one_call_at_a_time_asks_in_the_same_order_on_every_run(tmp_path) -> None:
    """A seeded local model's output depends on how many calls came before (its seed advances with each).

    With ``max_concurrency=1`` and a cache, the calls must come in a fixed order, or such a model writes
    other questions on every run (the cache threads used to decide the order).
    """

    class SeedChain(Scripted):  # valid on every third call: the outcome depends on the call order
        async def __call__(self, prompt: str) -> str:
            await super().__call__(prompt)
            if len(self.prompts) % 3:
                return "not json"
            return f'{{"question": "What is in {self.passage(prompt)}?", "answer": "enough words"}}'

    runs = []
    for i in range(6):
        model = SeedChain({}, default="")
        examples, report = run(
            docs_corpus({"a": 5, "b": 5, "c": 5}), model, 6, cache=JsonCache(tmp_path / f"run{i}.sqlite"),
            max_concurrency=1, max_retries=2,
        )  # fmt: skip
        runs.append(([Scripted.passage(p) for p in model.prompts], [e.id for e in examples], report.llm_calls))
    assert runs[0][2] > 6 and len(runs[0][1]) == 6
    assert all(r == runs[0] for r in runs[1:])


# --- passage windows (QuestionOptions.passage_sentences) -----------------------------------------------------------

LONG = (
    "The Normans gave their name to Normandy. Rollo led the Norse raiders. He took Rouen in 911. "
    "His son was William Longsword. The duchy grew under Richard I. The Normans later conquered England."
)


class ShortPassageWriter:
    """A fake small base model: a good question (about the passage's first fact) only from a short passage."""

    def __init__(self) -> None:
        self.passages: list[str] = []

    async def __call__(self, prompt: str) -> str:
        passage = Scripted.passage(prompt)
        self.passages.append(passage)
        if len(passage.split()) > 20:
            return '{"question": "Which country is Mount Kilimanjaro in?", "answer": "Tanzania"}'
        first = passage.split(". ")[0].split()
        return json.dumps({"question": f"What about {first[0]}?", "answer": " ".join(first[1:3])})


def test_a_passage_window_shows_the_llm_a_few_sentences_and_checks_against_the_whole_chunk() -> None:
    """With ``passage_sentences`` a small model gets short passages: more questions, gold still the chunk."""
    chunks = [CorpusEntry(f"c{i}", LONG) for i in range(4)]
    whole, whole_report = run(chunks, ShortPassageWriter(), 4, max_retries=1)
    assert whole == [] and whole_report.rejected == {"answer_not_in_chunk": 8}  # the old behaviour: no question

    writer = ShortPassageWriter()
    examples, report = run(chunks, writer, 4, max_retries=1, passage_sentences=2)
    assert len(examples) >= 2 and report.llm_calls <= 8
    assert {ex.gold_ids for ex in examples} <= {(c.id,) for c in chunks}
    sentences = [s.strip(". ") for s in LONG.split(". ")]
    for passage in writer.passages:  # two consecutive sentences of the chunk, never the whole chunk
        parts = [s.strip(". ") for s in passage.split(". ")]
        assert len(parts) == 2 and " ".join(parts) in " ".join(sentences)
    again = ShortPassageWriter()
    run(chunks, again, 4, max_retries=1, passage_sentences=2)
    assert again.passages == writer.passages  # seeded: the same windows on every run


def test_a_retry_sees_another_window_and_no_window_keeps_the_whole_chunk() -> None:
    """Each attempt has its own seeded window; without ``passage_sentences`` every attempt sees the whole chunk."""
    seen = Scripted({}, default="not json")
    run([CorpusEntry("c", LONG)], seen, 1, max_retries=5, passage_sentences=1)
    assert len(set(seen.prompts)) > 1 and all(Scripted.passage(p) in LONG for p in seen.prompts)
    whole = Scripted({}, default="not json")
    run([CorpusEntry("c", LONG)], whole, 1, max_retries=2)
    assert {Scripted.passage(p) for p in whole.prompts} == {LONG}


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_passage_window_is_refused(bad) -> None:
    with pytest.raises(CalibrationError, match="passage_sentences"):
        run([CorpusEntry("c", LONG)], Scripted({}, default=GOOD), 1, passage_sentences=bad)
