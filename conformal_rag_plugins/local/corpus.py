"""The bundled corpus and questions, loaded once."""

from __future__ import annotations

from functools import lru_cache

from ..datasets.examples import CalibrationExample, CorpusEntry, load_corpus, load_qa
from .data import bundled_corpus_paths, bundled_qa_path


@lru_cache(maxsize=1)
def bundled_corpus() -> tuple[CorpusEntry, ...]:
    """SQuAD 2.0 subset paragraphs followed by the distractors (1,179 passages)."""
    return tuple(load_corpus(*bundled_corpus_paths()))


@lru_cache(maxsize=2)
def bundled_questions(answerable_only: bool = True) -> tuple[CalibrationExample, ...]:
    """The SQuAD 2.0 subset questions (705 answerable, 1,407 in all)."""
    return tuple(load_qa(bundled_qa_path(), answerable_only=answerable_only))
