"""Paths of the bundled SQuAD 2.0 subset and distractors (CC BY-SA 4.0, see data/LICENSE.md)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def bundled_corpus_paths() -> tuple[Path, Path]:
    """The SQuAD paragraphs and the distractor passages (1,179 passages together).

    Examples
    --------
    >>> [p.parent.name for p in bundled_corpus_paths()]
    ['squad2_dev_subset', 'squad_distractors']
    """
    return (DATA_DIR / "squad2_dev_subset" / "corpus.jsonl", DATA_DIR / "squad_distractors" / "corpus.jsonl")


def bundled_qa_path() -> Path:
    """The 1,407 SQuAD 2.0 questions (705 answerable)."""
    return DATA_DIR / "squad2_dev_subset" / "qa.jsonl"
