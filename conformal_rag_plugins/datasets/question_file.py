"""One reader for every question file: SQuAD-style and labelled lines, told apart per line.

SQuAD-style lines (``evaluate``, ``report``, ``monitor``, the bundled data) hold ``question``,
``context_id``, ``answers`` and optionally ``is_impossible``; labelled lines (``label``,
``generate-calibration``) hold ``question`` with ``gold_ids``/``gold_texts``, optionally
``answers``, ``is_impossible``, ``metadata``. A line's form is that of its non-empty gold field; a
line without gold fits either. A file holds one form: a line of the other form or with both is
refused with file and line (mixed files are usually two files pasted together, with different
kinds of ids). Other fields go to ``metadata``. See docs/question-files.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputFileError
from .examples import CalibrationExample
from .jsonl_input import json_type, read_input_jsonl

FORM_SQUAD = "squad"
FORM_LABELLED = "labelled"
FORM_QUESTIONS = "questions"

#: How each form is named in messages.
FORMS = {
    FORM_SQUAD: "SQuAD-style: question, context_id, answers",
    FORM_LABELLED: "labelled: question, gold_ids/gold_texts",
    FORM_QUESTIONS: "questions without gold",
}

#: Each form's gold field, as named in the error of a mixed file.
_NAMES = {FORM_SQUAD: "SQuAD-style (context_id)", FORM_LABELLED: "labelled (gold_ids/gold_texts)"}

#: Fields a line's own keys are read into; any other key goes to ``metadata``.
_FIELDS = ("question", "context_id", "gold_ids", "gold_texts", "answers", "id", "is_impossible", "metadata")


@dataclass(frozen=True)
class QuestionFile:
    """The questions of one file (every one, answerable or not, in order), the 1-based line of each, and its form.

    ``form`` is ``"squad"``, ``"labelled"`` or ``"questions"`` (no line holds gold).
    """

    path: str
    form: str
    examples: tuple[CalibrationExample, ...]
    lines: tuple[int, ...]

    @property
    def n_unanswerable(self) -> int:
        """Questions marked ``is_impossible`` (SQuAD 2.0 unanswerable)."""
        return sum(ex.is_impossible for ex in self.examples)

    def answerable(self) -> list[CalibrationExample]:
        """The questions not marked ``is_impossible``, in file order."""
        return [ex for ex in self.examples if not ex.is_impossible]

    def labelled(self) -> list[CalibrationExample]:
        """The answerable questions, each with gold; an answerable question without gold raises ``InputFileError``.

        The error names the first such line (not ``is_impossible``, no ``context_id``/``gold_ids``/``gold_texts``)
        and their count.

        Examples
        --------
        >>> ex = CalibrationExample("Who?", gold_ids=("d",))
        >>> QuestionFile("qa.jsonl", FORM_LABELLED, (ex,), (1,)).labelled() == [ex]
        True
        """
        missing = [
            line
            for ex, line in zip(self.examples, self.lines, strict=True)
            if not ex.is_impossible and not ex.gold_ids and not ex.gold_texts
        ]
        if missing:
            raise InputFileError(
                f"{self.path}:{missing[0]}: the question has no gold (no context_id, gold_ids or gold_texts) and is "
                f"not marked is_impossible ({len(missing)} such line(s)); label the questions first (conformal-rag "
                'label) or mark unanswerable ones "is_impossible": true.'
            )
        return self.answerable()

    def describe(self) -> str:
        """One line saying what was read, e.g. ``read 90 questions (SQuAD-style: question, context_id, answers)``.

        Examples
        --------
        >>> QuestionFile("qa.jsonl", FORM_SQUAD, (CalibrationExample("Who?", gold_ids=("d",)),), (1,)).describe()
        'read 1 questions from qa.jsonl (SQuAD-style: question, context_id, answers)'
        """
        unanswerable = f", {self.n_unanswerable} of them unanswerable" if self.n_unanswerable else ""
        return f"read {len(self.examples)} questions from {self.path} ({FORMS[self.form]}{unanswerable})"


def _strings(value: Any, name: str, where: str) -> tuple[str, ...]:
    """A list of strings (a bare string is one item; ``null`` is none)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputFileError(f"{where}: '{name}' must be a list of strings, got {json_type(value)}.")
    return tuple(value)


def _id(value: Any, name: str, where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | None):
        raise InputFileError(f"{where}: '{name}' must be a string, got {json_type(value)}.")
    return value


def _line_form(row: dict[str, Any], where: str) -> str | None:
    """``"squad"``, ``"labelled"`` or ``None`` (no gold) of one line; a line with both is refused."""
    squad = row.get("context_id") not in (None, "")
    labelled = bool(row.get("gold_ids")) or bool(row.get("gold_texts"))
    if squad and labelled:
        raise InputFileError(
            f"{where}: the line has both a SQuAD-style 'context_id' and labelled 'gold_ids'/'gold_texts'; give "
            "its gold one way."
        )
    return FORM_SQUAD if squad else FORM_LABELLED if labelled else None


def _example(row: dict[str, Any], where: str) -> CalibrationExample:
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        got = "is missing" if "question" not in row else f"must be a non-empty string, got {json_type(question)}"
        raise InputFileError(f"{where}: 'question' {got}.")
    context_id = _id(row.get("context_id"), "context_id", where)
    gold_ids = tuple(str(g) for g in _strings(row.get("gold_ids"), "gold_ids", where))
    if context_id not in (None, ""):
        gold_ids = (str(context_id),)
    impossible = row.get("is_impossible", False)
    if not isinstance(impossible, bool | None):
        raise InputFileError(f"{where}: 'is_impossible' must be true or false, got {json_type(impossible)}.")
    meta = row.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InputFileError(f"{where}: 'metadata' must be an object, got {json_type(meta)}.")
    return CalibrationExample(
        question=question,
        gold_ids=gold_ids,
        gold_texts=_strings(row.get("gold_texts"), "gold_texts", where),
        answers=_strings(row.get("answers"), "answers", where),
        id=_id(row.get("id"), "id", where),
        is_impossible=bool(impossible),
        metadata=dict(meta) | {k: v for k, v in row.items() if k not in _FIELDS},  # plausible_answers, a tenant
    )


def read_question_file(path: str | Path, what: str = "qa") -> QuestionFile:
    """Read a question JSONL file of either form; ``what`` names the file in messages (``"qa"``, ``"questions"``).

    Raises ``InputFileError`` (a ``CalibrationError``) naming file and line, for the problems
    :func:`load_qa` lists, a line with both forms of gold,
    or a line of the other form than the file's first gold line.

    Examples
    --------
    >>> from conformal_rag_plugins.local.data import bundled_qa_path
    >>> read_question_file(bundled_qa_path()).form
    'squad'
    """
    rows = read_input_jsonl(path, what)
    if not rows:
        raise InputFileError(f"{path}: the {what} file holds no questions.")
    examples: list[CalibrationExample] = []
    seen: dict[str, int] = {}
    form: tuple[str, int] | None = None  # the file's form and the line that set it
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        example = _example(row, where)
        line_form = _line_form(row, where)
        if line_form is not None and form is None:
            form = (line_form, lineno)
        elif line_form is not None and form is not None and line_form != form[0]:
            raise InputFileError(
                f"{where}: a {_NAMES[line_form]} line, but line {form[1]} made this a {_NAMES[form[0]]} file; a "
                "question file holds one form, so split it or convert these lines."
            )
        if example.id is not None:
            key = str(example.id)
            if key in seen:
                raise InputFileError(f"{where}: duplicate question id {example.id!r} (first on line {seen[key]}).")
            seen[key] = lineno
        examples.append(example)
    return QuestionFile(
        path=str(path),
        form=form[0] if form is not None else FORM_QUESTIONS,
        examples=tuple(examples),
        lines=tuple(lineno for lineno, _ in rows),
    )


def load_qa(path: str | Path, *, answerable_only: bool = False) -> list[CalibrationExample]:
    """Read a question JSONL file: SQuAD-style (``question``, ``context_id``, ``answers``) or labelled lines.

    A ``context_id`` becomes the one gold id; labelled lines (``gold_ids``/``gold_texts``, as
    ``label`` writes them) are read as they are; other fields go to ``metadata``. Rules:
    :func:`read_question_file`.

    Parameters
    ----------
    answerable_only : bool
        Skip ``is_impossible`` questions (retrieval evaluation does).

    Raises
    ------
    InputFileError
        (a ``CalibrationError``) naming file and line: missing, unreadable or non-UTF-8 file, invalid
        JSON, a non-object line, a missing or empty ``question``, a wrong field type, a duplicate
        ``id``, a file mixing the two forms, or no questions.
    """
    file = read_question_file(path, "qa")
    return file.answerable() if answerable_only else list(file.examples)
