"""Calibration examples, the corpus/qa JSONL format, and seeded splits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..core.errors import CalibrationError
from ..runtime.strict_json import StrictJSONError, loads_finite

T = TypeVar("T")


@dataclass(frozen=True)
class CalibrationExample:
    """One labelled question.

    Parameters
    ----------
    question : str
    gold_ids : tuple of str
        Ids of the chunks that answer it (any one suffices).
    gold_texts : tuple of str
        Or their texts, matched exactly (after stripping) when ids are unknown.
    answers : tuple of str
        Reference answers (used by answer sets).
    id : str, optional
    is_impossible : bool
        SQuAD 2.0 unanswerable question.

    Examples
    --------
    >>> CalibrationExample("Who?", gold_ids=("doc#0",)).gold_ids
    ('doc#0',)
    """

    question: str
    gold_ids: tuple[str, ...] = ()
    gold_texts: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    id: str | None = None
    is_impossible: bool = False
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise CalibrationError("A calibration example needs a non-empty question.")
        for name in ("gold_ids", "gold_texts", "answers"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, (value,))
            else:
                object.__setattr__(self, name, tuple(value))

    @property
    def digest(self) -> str:
        """:func:`question_digest` of this example (recorded in calibrations)."""
        return question_digest(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        data = asdict(self)
        for key in ("gold_ids", "gold_texts", "answers"):
            data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CalibrationExample:
        """Inverse of :meth:`to_dict`; unknown keys go to ``metadata``."""
        known = {"question", "gold_ids", "gold_texts", "answers", "id", "is_impossible", "metadata"}
        extra = {k: v for k, v in data.items() if k not in known}
        meta = dict(data.get("metadata") or {}) | extra
        # a bare string stays one id/text/answer (__post_init__ wraps it); tuple("ab") would split it into letters
        return cls(
            question=data["question"],
            gold_ids=data.get("gold_ids") or (),
            gold_texts=data.get("gold_texts") or (),
            answers=data.get("answers") or (),
            id=data.get("id"),
            is_impossible=bool(data.get("is_impossible", False)),
            metadata=meta,
        )


def question_digest(example: CalibrationExample) -> str:
    """A short, stable digest of an example's id and question (16 hex digits of SHA-256).

    Calibrations record digests, not questions, to check that both answer-set stages used the same
    questions and that an optimisation split is disjoint from them.

    Examples
    --------
    >>> len(question_digest(CalibrationExample("Who?")))
    16
    """
    import hashlib

    text = f"{example.id or ''}\x1f{example.question.strip()}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class CorpusEntry:
    """One passage of a corpus JSONL file (``id``, ``text``, optional ``title``)."""

    id: str
    text: str
    title: str | None = None


def _read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8-sig") as fh:  # a leading byte-order mark is skipped
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(loads_finite(line))
            except json.JSONDecodeError as exc:
                raise CalibrationError(f"{path}:{lineno} is not valid JSON: {exc.msg}.") from exc
            except StrictJSONError as exc:
                raise CalibrationError(f"{path}:{lineno} {exc}.") from None
    return rows


def save_examples(examples: Iterable[CalibrationExample], path: str | Path) -> None:
    """Write examples as JSONL, one per line."""
    with open(path, "w", encoding="utf-8") as fh:
        for ex in examples:
            fh.write(json.dumps(ex.to_dict(), ensure_ascii=False) + "\n")


def load_examples(path: str | Path) -> list[CalibrationExample]:
    """Read examples written by :func:`save_examples`."""
    return [CalibrationExample.from_dict(r) for r in _read_jsonl(path)]


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "true/false", type(None): "null"}


def _json_type(value: Any) -> str:
    """How a JSON value is named in error messages ("an array", "a number", ...)."""
    return _JSON_TYPES.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def _read_input_jsonl(path: str | Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line of a user's JSONL file (a UTF-8 BOM is accepted).

    Any problem (missing, directory, unreadable, non-UTF-8, invalid JSON, not an object) is an
    ``InputFileError`` naming the file and line.
    """
    from ..core.errors import InputFileError

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
            raise InputFileError(f"{path}:{lineno}: expected one JSON object per line, got {_json_type(value)}.")
        rows.append((lineno, value))
    return rows


def load_corpus(*paths: str | Path) -> list[CorpusEntry]:
    """Read one or more corpus JSONL files (``{"id", "text", "title"?}`` per line).

    Raises
    ------
    InputFileError
        (a ``CalibrationError``) naming file and line: missing, unreadable or non-UTF-8 file, invalid
        JSON, a non-object line, missing ``id``/``text``, non-string ``text``, a duplicate id (across
        files too), or an empty file.

    Examples
    --------
    >>> from conformal_rag_plugins.local.data import bundled_corpus_paths
    >>> len(load_corpus(*bundled_corpus_paths())) > 1000
    True
    """
    from ..core.errors import InputFileError

    entries: list[CorpusEntry] = []
    seen: dict[str, str] = {}
    for path in paths:
        rows = _read_input_jsonl(path, "corpus")
        if not rows:
            raise InputFileError(f"{path}: the corpus file holds no entries.")
        for lineno, row in rows:
            where = f"{path}:{lineno}"
            if "id" not in row or "text" not in row:
                raise InputFileError(f"{where}: every corpus line needs 'id' and 'text'.")
            raw_id, text, title = row["id"], row["text"], row.get("title")
            if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
                raise InputFileError(f"{where}: 'id' must be a non-empty string, got {_json_type(raw_id)}.")
            if not isinstance(text, str):
                raise InputFileError(f"{where}: 'text' must be a string, got {_json_type(text)}.")
            if title is not None and not isinstance(title, str):
                raise InputFileError(f"{where}: 'title' must be a string, got {_json_type(title)}.")
            entry_id = str(raw_id)
            if entry_id in seen:
                raise InputFileError(f"{where}: duplicate corpus id {entry_id!r} (first at {seen[entry_id]}).")
            seen[entry_id] = where
            entries.append(CorpusEntry(entry_id, text, title))
    return entries


def load_qa(path: str | Path, *, answerable_only: bool = False) -> list[CalibrationExample]:
    """Read a question JSONL file: SQuAD-style (``question``, ``context_id``, ``answers``) or labelled lines.

    A ``context_id`` becomes the one gold id; labelled lines (``gold_ids``/``gold_texts``, as
    ``label`` writes them) are read as they are; other fields go to ``metadata``. Rules:
    :func:`~conformal_rag_plugins.datasets.question_file.read_question_file`.

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
    from .question_file import read_question_file

    file = read_question_file(path, "qa")
    return file.answerable() if answerable_only else list(file.examples)


def split_examples(items: Sequence[T], fractions: Sequence[float] = (0.5, 0.5), *, seed: int = 0) -> list[list[T]]:
    """Shuffle with a seed and cut into consecutive parts of the given fractions.

    Examples
    --------
    >>> [len(p) for p in split_examples(list(range(10)), (0.3, 0.7), seed=1)]
    [3, 7]
    """
    if not fractions or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise CalibrationError(f"Split fractions must be positive and sum to 1, got {tuple(fractions)}.")
    perm = np.random.default_rng(seed).permutation(len(items))
    cuts = np.round(np.cumsum(fractions)[:-1] * len(items)).astype(int)
    return [[items[i] for i in part] for part in np.split(perm, cuts)]
