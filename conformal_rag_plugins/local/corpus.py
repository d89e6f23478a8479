"""The bundled corpus and questions, loaded once, and the bundled articles as a folder of text files."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..datasets.examples import CalibrationExample, CorpusEntry, load_corpus
from ..datasets.question_file import load_qa
from .data import bundled_corpus_paths, bundled_qa_path


@lru_cache(maxsize=1)
def bundled_corpus() -> tuple[CorpusEntry, ...]:
    """SQuAD 2.0 subset paragraphs followed by the distractors (1,179 passages)."""
    return tuple(load_corpus(*bundled_corpus_paths()))


@lru_cache(maxsize=2)
def bundled_questions(answerable_only: bool = True) -> tuple[CalibrationExample, ...]:
    """The SQuAD 2.0 subset questions (705 answerable, 1,407 in all)."""
    return tuple(load_qa(bundled_qa_path(), answerable_only=answerable_only))


def write_bundled_articles(folder: str | Path) -> list[Path]:
    """Write each bundled SQuAD article as ``<title>.txt`` (paragraphs separated by a blank line) into ``folder``.

    The distractor passages (they have no title) are left out. The folder is created when missing;
    the files written are returned, sorted by name.

    Examples
    --------
    >>> import tempfile
    >>> written = write_bundled_articles(tempfile.mkdtemp())
    >>> len(written), written[1].name
    (5, 'Normans.txt')
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    articles: dict[str, list[str]] = {}
    for passage in bundled_corpus():
        if passage.title:
            articles.setdefault(passage.title, []).append(passage.text)
    written = []
    for title, paragraphs in articles.items():
        path = out / f"{title}.txt"
        path.write_text("\n\n".join(paragraphs), encoding="utf-8")
        written.append(path)
    return sorted(written)
