"""Four short passages about the Normans and one question each, and a JSONL writer: the input files of CLI tests.

Shared by the command-line tests in ``tests/commands/`` and ``tests/datasets/test_question_file.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

#: ``(id, text)`` of each passage.
ENTRIES = [
    ("normans", "The Normans gave their name to Normandy, a region in northern France."),
    ("rollo", "Rollo was the Viking leader who founded the duchy of Normandy in 911."),
    ("seine", "The Seine is a river that flows through Paris into the English Channel."),
    ("hastings", "At the Battle of Hastings in 1066 the Normans defeated the English army."),
]
#: ``(id, question, answer, passage id)`` of each question.
QUESTIONS = [
    ("q1", "What region did the Normans name?", "Normandy", "normans"),
    ("q2", "Who founded the duchy of Normandy?", "Rollo", "rollo"),
    ("q3", "Which river flows through Paris?", "Seine", "seine"),
    ("q4", "When was the Battle of Hastings?", "1066", "hastings"),
]


def write_jsonl(path: Path, rows: list) -> Path:
    """Write ``rows`` one JSON object per line and return ``path``."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_corpus(path: Path, entries: list[tuple[str, str]] = ENTRIES) -> Path:
    """A corpus file (``{"id", "text"}`` per line) of ``entries``."""
    return write_jsonl(path, [{"id": i, "text": t} for i, t in entries])
