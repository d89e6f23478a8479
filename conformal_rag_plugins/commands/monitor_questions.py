"""The question files of ``conformal-rag monitor``: the stream it replays and its label-free reference."""

from __future__ import annotations

from pathlib import Path


def _read_questions(path: str | Path, what: str) -> list[str]:
    from ..core.errors import InputFileError
    from ..datasets.jsonl_input import read_input_jsonl

    rows = read_input_jsonl(path, what)
    out = []
    for lineno, row in rows:
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            got = "is missing" if "question" not in row else "must be a non-empty string"
            raise InputFileError(f"{path}:{lineno}: 'question' {got}.")
        out.append(question)
    if not out:
        raise InputFileError(f"{path}: the {what} file holds no questions.")
    return out


def read_stream(path: str | Path) -> list[str]:
    """The ``question`` of every line of a JSONL file (qa or questions format), naming file and line on errors."""
    return _read_questions(path, "stream")


def reference_questions(path: str | Path) -> list[str]:
    """Every question of a question file, answerable or not: the monitor's label-free reference.

    ``is_impossible`` questions stay in: leaving them out makes the reference another population
    than the (unlabelled) stream.
    """
    from ..datasets.question_file import read_question_file

    return [ex.question for ex in read_question_file(path, "reference").examples]
