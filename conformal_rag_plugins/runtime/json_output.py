"""Read a JSON object out of free LLM text, without ``eval``.

LLM output wraps JSON in code fences and prose, and base models keep writing more few-shot
examples: :func:`parse_json_object` returns the first *balanced* ``{...}`` (braces in strings,
escaped quotes included, do not count) that :func:`json.loads` accepts as an object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the ``{`` at ``start``, or ``None`` if it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def iter_balanced_objects(text: str) -> Iterator[str]:
    """Yield every balanced ``{...}`` span of ``text``, left to right (outermost spans only).

    A ``{`` that never closes is skipped and the scan goes on after it.

    Examples
    --------
    >>> list(iter_balanced_objects('a {"x": "}"} b {1} {'))
    ['{"x": "}"}', '{1}']
    """
    pos = text.find("{")
    while pos != -1:
        end = _balanced_end(text, pos)
        if end is None:
            pos = text.find("{", pos + 1)
            continue
        yield text[pos:end]
        pos = text.find("{", end)


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (raw LLM output), or ``None``; non-JSON balanced spans are skipped.

    Examples
    --------
    >>> parse_json_object('```json\\n{"question": "Who?", "answer": "Rollo"}\\n```')
    {'question': 'Who?', 'answer': 'Rollo'}
    >>> parse_json_object('Sure: {"q": "a {b}"} Passage: next {"q": "c"}')
    {'q': 'a {b}'}
    """
    if not text:
        return None
    for span in iter_balanced_objects(text):
        try:
            value = json.loads(span)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None
