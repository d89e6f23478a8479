"""Calibration examples, the corpus/qa JSONL format, and seeded splits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..core.errors import CalibrationError

__all__ = [
    "CalibrationExample",
    "CorpusEntry",
    "load_corpus",
    "load_examples",
    "load_qa",
    "question_digest",
    "save_examples",
    "split_examples",
]

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

    Calibrations record the digests of their questions (not the questions), so that
    the two stages of an answer-set calibration can be checked to use the same
    questions and a Bayesian-optimisation split can be checked to be disjoint from them.

    Examples
    --------
    >>> question_digest(CalibrationExample("Who?", id="q1"))
    '...'
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
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CalibrationError(f"{path}:{lineno} is not valid JSON: {exc.msg}.") from exc
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

    Examples
    --------
    >>> from conformal_rag_plugins.local.data import bundled_corpus_paths
    >>> len(load_corpus(*bundled_corpus_paths())) > 1000
    True
    """
    entries: list[CorpusEntry] = []
    seen: set[str] = set()
    for path in paths:
        for row in _read_jsonl(path):
            if "id" not in row or "text" not in row:
                raise CalibrationError(f"{path}: every corpus line needs 'id' and 'text'.")
            if row["id"] in seen:
                raise CalibrationError(f"{path}: duplicate corpus id {row['id']!r}.")
            seen.add(row["id"])
            entries.append(CorpusEntry(str(row["id"]), str(row["text"]), row.get("title")))
    return entries


def load_qa(path: str | Path, *, answerable_only: bool = False) -> list[CalibrationExample]:
    """Read a qa JSONL file (SQuAD-style ``question``, ``answers``, ``context_id``).

    Parameters
    ----------
    answerable_only : bool
        Skip ``is_impossible`` questions (retrieval evaluation does).
    """
    out = []
    for row in _read_jsonl(path):
        if answerable_only and row.get("is_impossible", False):
            continue
        out.append(
            CalibrationExample(
                question=row["question"],
                gold_ids=(row["context_id"],) if row.get("context_id") else (),
                answers=tuple(row.get("answers") or ()),
                id=row.get("id"),
                is_impossible=bool(row.get("is_impossible", False)),
                metadata={k: row[k] for k in ("plausible_answers",) if k in row},
            )
        )
    return out


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
