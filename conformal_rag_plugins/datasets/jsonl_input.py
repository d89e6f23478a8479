"""Reading a user's JSONL file line by line, every problem an ``InputFileError`` naming file and line.

The corpus reader (:func:`~.examples.load_corpus`) and the question-file reader
(:func:`~.question_file.read_question_file`) both read through :func:`read_input_jsonl`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.errors import InputFileError
from ..runtime.strict_json import StrictJSONError, loads_finite

JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "true/false", type(None): "null"}


def json_type(value: Any) -> str:
    """How a JSON value is named in error messages ("an array", "a number", ...)."""
    return JSON_TYPES.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def read_input_jsonl(path: str | Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line of a user's JSONL file (a UTF-8 BOM is accepted).

    Any problem (missing, directory, unreadable, non-UTF-8, invalid JSON, not an object) is an
    ``InputFileError`` naming the file and line.
    """
    if Path(path).is_dir():
        raise InputFileError(f"{path}: is a directory, not a {what} JSONL file.")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise InputFileError(f"{path}: no such {what} file.") from exc
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {what} file ({exc.strerror or exc}).") from exc
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputFileError(
                f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                f"the {what} file must be UTF-8 encoded JSONL."
            ) from exc
        if not line.strip():
            continue
        try:
            value = loads_finite(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{path}:{lineno}: invalid JSON ({exc.msg} at column {exc.colno}).") from exc
        except StrictJSONError as exc:
            raise InputFileError(f"{path}:{lineno}: the line {exc}.") from None
        if not isinstance(value, dict):
            raise InputFileError(f"{path}:{lineno}: expected one JSON object per line, got {json_type(value)}.")
        rows.append((lineno, value))
    return rows
