"""Reading the first JSON object out of free LLM text."""

from __future__ import annotations

import pytest

from conformal_rag_plugins.runtime.json_output import iter_balanced_objects, parse_json_object


def test_plain_object() -> None:
    assert parse_json_object('{"question": "Who?", "answer": "Rollo"}') == {"question": "Who?", "answer": "Rollo"}


def test_code_fence_and_prose() -> None:
    text = 'Here is the JSON you asked for:\n```json\n{"question": "Who?", "answer": "Rollo"}\n```\nHope it helps.'
    assert parse_json_object(text) == {"question": "Who?", "answer": "Rollo"}


def test_base_model_continuation_takes_the_first_object() -> None:
    text = (
        ' {"question": "Who led the Normans?", "answer": "Rollo"}\n\n'
        'Passage: Paris is the capital of France.\nJSON: {"question": "What is the capital?", "answer": "Paris"}'
    )
    assert parse_json_object(text) == {"question": "Who led the Normans?", "answer": "Rollo"}


def test_braces_and_escaped_quotes_inside_strings() -> None:
    text = 'x {"question": "What does \\"{a}\\" mean }?", "answer": "set {1, 2}"} trailing }'
    assert parse_json_object(text) == {"question": 'What does "{a}" mean }?', "answer": "set {1, 2}"}


def test_nested_objects_are_kept_whole() -> None:
    assert parse_json_object('{"a": {"b": {"c": 1}}, "d": 2} {"e": 3}') == {"a": {"b": {"c": 1}}, "d": 2}


def test_invalid_balanced_span_is_skipped_for_a_later_valid_one() -> None:
    assert parse_json_object('{not json} then {"answer": "ok"}') == {"answer": "ok"}


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "no object at all",
        '{"question": "truncated...',  # never closes
        "{'question': 'python dict'}",  # single quotes: not JSON, never evaluated
        "[1, 2, 3]",
    ],
)
def test_no_object_gives_none(text) -> None:
    assert parse_json_object(text) is None


def test_unclosed_brace_does_not_hide_a_later_object() -> None:
    assert list(iter_balanced_objects('{ "a": 1 {"b": 2}')) == ['{"b": 2}']
    assert parse_json_object('{ "a": 1 {"b": 2}') == {"b": 2}
