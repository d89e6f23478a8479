"""Parse JSON text that a person or another program wrote, refusing what Python's parser lets through.

:func:`json.loads` reads ``NaN`` and ``Infinity``, turns ``1e999`` into ``inf``, raises a bare
``ValueError`` on an integer of more than 4,300 digits and ``RecursionError`` on deep nesting.
:func:`loads_finite` refuses each with a :class:`StrictJSONError`: a ``ValueError`` with a one-line
message, which the callers (saved-file loaders, input-file readers) wrap in their own error.
"""

from __future__ import annotations

import json
import math
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


def loads_finite(text: str) -> Any:
    """:func:`json.loads` with finite floats, integers of at most ``MAX_INT_DIGITS`` digits and bounded nesting.

    Raises
    ------
    json.JSONDecodeError
        Text that is not JSON (as :func:`json.loads`).
    StrictJSONError
        ``NaN``/``Infinity``, a float that overflows to infinity (``1e999``), an integer of more than
        ``MAX_INT_DIGITS`` digits, or nesting too deep for the parser.

    Examples
    --------
    >>> loads_finite('{"n": 3, "x": 0.5}')
    {'n': 3, 'x': 0.5}
    >>> loads_finite('[1e999]')
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.runtime.strict_json.StrictJSONError: holds the number 1e999, too large for a float ...
    """
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError:
        raise StrictJSONError("is nested too deeply to read") from None
