"""Calibration examples, the corpus JSONL format, and seeded splits (question files: :mod:`.question_file`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..core.errors import CalibrationError, InputFileError
from ..runtime.strict_json import StrictJSONError, loads_finite
from .jsonl_input import json_type, read_input_jsonl

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
    return digest_of(example.question, example.id)


def digest_of(question: str, example_id: str | None = None) -> str:
    """:func:`question_digest` of a question text and its example id (``None``: no id).

    Examples
    --------
    >>> digest_of("Who?") == question_digest(CalibrationExample("Who?"))
    True
    """
    import hashlib

    text = f"{example_id or ''}\x1f{question.strip()}"
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
    entries: list[CorpusEntry] = []
    seen: dict[str, str] = {}
    for path in paths:
        rows = read_input_jsonl(path, "corpus")
        if not rows:
            raise InputFileError(f"{path}: the corpus file holds no entries.")
        for lineno, row in rows:
            where = f"{path}:{lineno}"
            if "id" not in row or "text" not in row:
                raise InputFileError(f"{where}: every corpus line needs 'id' and 'text'.")
            raw_id, text, title = row["id"], row["text"], row.get("title")
            if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
                raise InputFileError(f"{where}: 'id' must be a non-empty string, got {json_type(raw_id)}.")
            if not isinstance(text, str):
                raise InputFileError(f"{where}: 'text' must be a string, got {json_type(text)}.")
            if title is not None and not isinstance(title, str):
                raise InputFileError(f"{where}: 'title' must be a string, got {json_type(title)}.")
            entry_id = str(raw_id)
            if entry_id in seen:
                raise InputFileError(f"{where}: duplicate corpus id {entry_id!r} (first at {seen[entry_id]}).")
            seen[entry_id] = where
            entries.append(CorpusEntry(entry_id, text, title))
    return entries


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
