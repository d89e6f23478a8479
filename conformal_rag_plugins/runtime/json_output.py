"""Read a JSON object out of free LLM text, without ``eval``.

LLM outputs wrap JSON in code fences, add prose before or after it, and base models
often keep going and write more few-shot examples after the first object.
:func:`parse_json_object` scans for the first *balanced* ``{...}`` (braces inside
JSON strings, including escaped quotes, do not count) that :func:`json.loads`
accepts as an object, and returns it; later objects are ignored.
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
    """The first JSON object in ``text``, or ``None`` when there is none.

    Tolerates code fences, prose around the object and trailing text (such as more
    generated examples). Balanced spans that are not valid JSON objects are skipped.
    Never evaluates code.

    Parameters
    ----------
    text : str or None
        Raw LLM output.

    Returns
    -------
    dict or None

    Examples
    --------
    >>> parse_json_object('```json\\n{"question": "Who?", "answer": "Rollo"}\\n```')
    {'question': 'Who?', 'answer': 'Rollo'}
    >>> parse_json_object('Sure: {"q": "a {b}"} Passage: next {"q": "c"}')
    {'q': 'a {b}'}
    >>> parse_json_object("no object here") is None
    True
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
