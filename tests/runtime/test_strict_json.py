"""Issue 41 item 6: JSON that Python's parser reads one way and another reader another way, or into non-text.

Two equal keys in one object keep the last in :func:`json.loads` (another reader may keep the first,
and a signature over the parsed object still verifies); an escaped lone surrogate (``"\\ud800"``)
parses into a string that no UTF-8 file, hash or SQLite row can take later (a traceback far from the
file). :func:`loads_finite`, under every saved-file and input-file reader, refuses both.
"""

from __future__ import annotations

import json

import pytest

from conformal_rag_plugins.runtime.strict_json import StrictJSONError, loads_finite


@pytest.mark.parametrize(
    "text",
    ['{"threshold": 9, "threshold": 0.5}', '[{"a": 1}, {"b": {"c": 1, "c": 1}}]', '{"x": {}, "x": {}}'],
)
def test_a_key_twice_in_one_object_is_refused(text: str) -> None:
    json.loads(text)  # Python's own parser keeps the last one silently
    with pytest.raises(StrictJSONError, match=r"holds the key '\w' twice in one object|'threshold' twice"):
        loads_finite(text)


def test_equal_keys_in_different_objects_are_fine() -> None:
    assert loads_finite('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    "text",
    [
        '{"id": "\\ud800"}',  # a high surrogate alone
        '{"text": "ok \\udfff"}',  # a low surrogate alone
        '{"q": ["fine", "x\\uDBFFy"]}',  # upper-case escape, inside an array
        '{"\\ud800": 1}',  # in a key
        '{"a": "\\ude00\\ud83d"}',  # a pair in the wrong order
    ],
)
def test_a_lone_surrogate_is_refused(text: str) -> None:
    with pytest.raises(UnicodeEncodeError):
        json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")  # what later breaks on it
    with pytest.raises(StrictJSONError, match="lone UTF-16 surrogate"):
        loads_finite(text)


def test_a_surrogate_pair_and_an_escaped_backslash_are_text() -> None:
    assert loads_finite('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    assert loads_finite('{"a": "\\\\ud800"}') == {"a": "\\ud800"}  # a backslash, then the letters "ud800"
