"""Unit tests for calibration examples, the bundled JSONL data and seeded splits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import (
    CalibrationExample,
    CorpusEntry,
    load_corpus,
    load_examples,
    save_examples,
    split_examples,
)
from conformal_rag_plugins.datasets.question_file import load_qa
from conformal_rag_plugins.local.data import bundled_corpus_paths, bundled_qa_path
from conformal_rag_plugins.retrieval.gold_matching import gold_positions

# --- CalibrationExample ----------------------------------------------------------------------------


def test_example_round_trip_jsonl(tmp_path):
    examples = [
        CalibrationExample("Who wrote it?", gold_ids=("doc#0", "doc#3"), answers=("Ann", "Ann B."), id="q1"),
        CalibrationExample("Où est-il ?", gold_texts=("Un passage ünicode.",), is_impossible=True),
        CalibrationExample("Plain?", metadata={"source": "unit", "n": 3}),
    ]
    path = tmp_path / "cal.jsonl"
    save_examples(examples, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert all(isinstance(json.loads(line), dict) for line in lines)
    assert "ünicode" in lines[1]  # written as UTF-8, not \\u escapes
    loaded = load_examples(path)
    assert loaded == examples
    assert [ex.metadata for ex in loaded] == [ex.metadata for ex in examples]  # metadata is not compared by ==
    assert loaded[0].gold_ids == ("doc#0", "doc#3")
    assert loaded[1].is_impossible is True


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_empty_question_raises(question):
    with pytest.raises(CalibrationError, match="non-empty question"):
        CalibrationExample(question)


def test_non_string_question_raises():
    with pytest.raises(CalibrationError):
        CalibrationExample(None)  # type: ignore[arg-type]


def test_string_fields_are_wrapped_not_split():
    ex = CalibrationExample("q", gold_ids="doc#0", gold_texts="some text", answers="Paris")
    assert ex.gold_ids == ("doc#0",)
    assert ex.gold_texts == ("some text",)
    assert ex.answers == ("Paris",)
    assert CalibrationExample("q", gold_ids=["a", "b"]).gold_ids == ("a", "b")


def test_from_dict_keeps_a_bare_string_whole(tmp_path):
    """A hand-written JSONL line with ``"gold_ids": "doc#0"`` is one id, not five one-letter ids."""
    ex = CalibrationExample.from_dict({"question": "q", "gold_ids": "doc#0", "gold_texts": "Para.", "answers": "x"})
    assert ex.gold_ids == ("doc#0",)
    assert ex.gold_texts == ("Para.",)
    assert ex.answers == ("x",)
    path = tmp_path / "hand.jsonl"
    path.write_text('{"question": "Where?", "gold_ids": "Normans#0"}\n', encoding="utf-8")
    assert load_examples(path)[0].gold_ids == ("Normans#0",)


def test_from_dict_unknown_keys_go_to_metadata():
    ex = CalibrationExample.from_dict({"question": "q", "title": "T", "metadata": {"a": 1}})
    assert ex.metadata == {"a": 1, "title": "T"}
    assert ex.gold_ids == ()
    assert ex.is_impossible is False


def test_load_examples_reports_bad_json_with_line_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "ok"}\n\n{"question": oops}\n', encoding="utf-8")
    with pytest.raises(CalibrationError, match=r"bad\.jsonl:3"):
        load_examples(path)


def test_every_jsonl_reader_accepts_a_utf8_byte_order_mark(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"question": "Who?", "gold_ids": ["a"]}\n')
    assert [ex.question for ex in load_examples(path)] == ["Who?"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "text": "x"}\n')
    assert [e.id for e in load_corpus(corpus)] == ["a"]


def test_examples_are_frozen():
    ex = CalibrationExample("q")
    with pytest.raises(AttributeError):
        ex.question = "other"  # type: ignore[misc]


# --- bundled data ----------------------------------------------------------------------------------


def test_load_bundled_corpus():
    paths = bundled_corpus_paths()
    entries = load_corpus(*paths)
    assert len(entries) == 1179
    assert all(isinstance(e, CorpusEntry) and e.id and e.text for e in entries)
    assert len({e.id for e in entries}) == len(entries)
    squad_only = load_corpus(paths[0])
    assert 0 < len(squad_only) < 1179


def test_load_bundled_qa():
    everything = load_qa(bundled_qa_path())
    answerable = load_qa(bundled_qa_path(), answerable_only=True)
    assert len(everything) == 1407
    assert len(answerable) == 705
    assert sum(not ex.is_impossible for ex in everything) == 705
    assert all(not ex.is_impossible and ex.answers for ex in answerable)
    corpus_ids = {e.id for e in load_corpus(*bundled_corpus_paths())}
    # every answerable question points at one bundled passage
    assert all(len(ex.gold_ids) == 1 and ex.gold_ids[0] in corpus_ids for ex in answerable)
    first = answerable[0]
    assert first.question == "In what country is Normandy located?"
    assert first.gold_ids == ("Normans#0",)
    assert "France" in first.answers


def test_load_corpus_rejects_duplicates_and_missing_fields(tmp_path):
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(CalibrationError, match="duplicate"):
        load_corpus(dup)
    a = tmp_path / "a.jsonl"
    a.write_text('{"id": "a", "text": "x", "title": "T"}\n', encoding="utf-8")
    with pytest.raises(CalibrationError, match="duplicate"):
        load_corpus(a, a)  # duplicates across files too
    assert load_corpus(a) == [CorpusEntry("a", "x", "T")]
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(CalibrationError, match="'id' and 'text'"):
        load_corpus(missing)


# --- split_examples --------------------------------------------------------------------------------


def test_split_is_seeded_deterministic_and_disjoint():
    items = list(range(100))
    a = split_examples(items, (0.3, 0.7), seed=5)
    b = split_examples(items, (0.3, 0.7), seed=5)
    c = split_examples(items, (0.3, 0.7), seed=6)
    assert a == b
    assert a != c
    assert [len(p) for p in a] == [30, 70]
    assert set(a[0]).isdisjoint(a[1])
    assert sorted(a[0] + a[1]) == items
    assert a[0] != items[:30]  # it shuffles
    assert items == list(range(100))  # and does not mutate its input


@pytest.mark.parametrize("fractions", [(), (0.5, 0.6), (0.0, 1.0), (-0.2, 1.2), (1.1,)])
def test_split_bad_fractions(fractions):
    with pytest.raises(CalibrationError, match="fractions"):
        split_examples(list(range(10)), fractions)


@settings(deadline=None, max_examples=100)
@given(
    n=st.integers(0, 300),
    cuts=st.lists(st.integers(1, 20), min_size=1, max_size=4),
    seed=st.integers(0, 2**31),
)
def test_property_split_is_a_partition(n, cuts, seed):
    fractions = [c / sum(cuts) for c in cuts]
    parts = split_examples(list(range(n)), fractions, seed=seed)
    assert len(parts) == len(fractions)
    flat = [x for p in parts for x in p]
    assert sorted(flat) == list(range(n))
    for part, f in zip(parts, fractions, strict=True):
        assert abs(len(part) - f * n) <= 1


# --- gold matching ---------------------------------------------------------------------------------


def test_gold_positions_by_id_and_by_text():
    ids = ["a", "b", None, "d"]
    texts = ["alpha", "beta", "  gamma \n", "delta"]
    assert gold_positions(CalibrationExample("q", gold_ids=("b", "d")), ids, texts) == (1, 3)
    assert gold_positions(CalibrationExample("q", gold_texts=("gamma",)), ids, texts) == (2,)
    assert gold_positions(CalibrationExample("q", gold_ids=("zz",)), ids, texts) == ()
    assert gold_positions(CalibrationExample("q", gold_ids=("a",), gold_texts=("delta",)), ids, texts) == (0, 3)
    # no texts given: a candidate without id is never matched
    assert gold_positions(CalibrationExample("q", gold_ids=("x",)), [None], ["x"]) == ()
