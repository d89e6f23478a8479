"""Parse JSON text that a person or another program wrote, refusing what Python's parser lets through.

:func:`json.loads` reads ``NaN`` and ``Infinity``, turns ``1e999`` into ``inf``, raises a bare
``ValueError`` on an integer of more than 4,300 digits, ``RecursionError`` on deep nesting, and keeps
the last of two equal keys in one object (another reader may keep the first: the file then means two
things, and a signature over the parsed object still verifies), and reads an escaped lone UTF-16 surrogate
(``"\\ud800"``) into a string that no UTF-8 file, hash or database can take later.
:func:`loads_finite` refuses each with a :class:`StrictJSONError`: a ``ValueError`` with a one-line
message, which the callers (saved-file loaders, input-file readers) wrap in their own error.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: Longest integer read (digits, sign excluded): ample for counts, seeds and numeric ids.
MAX_INT_DIGITS = 100


class StrictJSONError(ValueError):
    """JSON text that is valid for Python's parser but holds a value this library does not read."""


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"holds the non-JSON number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 20 else f"{text[:17]}..."
        raise StrictJSONError(f"holds the number {shown}, too large for a float (it would read as infinity)")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise StrictJSONError(f"holds a whole number of {digits} digits (at most {MAX_INT_DIGITS} are read)")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            shown = key if len(key) <= 40 else f"{key[:37]}..."
            raise StrictJSONError(f"holds the key {shown!r} twice in one object (which one counts is ambiguous)")
        out[key] = value
    return out


#: A ``\\uD800``-``\\uDFFF`` escape: only then can a parsed string hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any) -> str | None:
    """The first string in ``value`` (keys included) holding a lone surrogate, or ``None``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def loads_finite(text: str) -> Any:
    """:func:`json.loads` with finite floats, bounded integers and nesting, and no key twice in an object.

    Raises
    ------
    json.JSONDecodeError
        Text that is not JSON (as :func:`json.loads`).
    StrictJSONError
        ``NaN``/``Infinity``, a float that overflows to infinity (``1e999``), an integer of more than
        ``MAX_INT_DIGITS`` digits, nesting too deep for the parser, a key twice in one object, or a
        string holding a lone surrogate.

    Examples
    --------
    >>> loads_finite('{"n": 3, "x": 0.5}')
    {'n': 3, 'x': 0.5}
    >>> loads_finite('[1e999]')
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.runtime.strict_json.StrictJSONError: holds the number 1e999, too large for a float ...
    >>> loads_finite('{"threshold": 9, "threshold": 0.5}')
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.runtime.strict_json.StrictJSONError: holds the key 'threshold' twice in one object ...
    """
    try:
        value = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        raise StrictJSONError("is nested too deeply to read") from None
    if _SURROGATE_ESCAPE.search(text):
        broken = _lone_surrogate(value)
        if broken is not None:
            shown = broken.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")[:60]
            raise StrictJSONError(
                f"holds a lone UTF-16 surrogate escape in the string {shown!r} (half of a pair: not text)"
            )
    return value
