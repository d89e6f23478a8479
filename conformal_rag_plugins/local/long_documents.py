"""Long documents built from the bundled SQuAD subset, for the long-document tests and benchmark.

Runs of 6 paragraphs of one article (about 670 MiniLM tokens, 2.6x the embedding window);
untitled distractors in file-order runs. Gold ids move to the document, so chunk-level gold must
find the answer again inside the chunks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..datasets.examples import CalibrationExample, CorpusEntry

#: Paragraphs joined per long document.
DEFAULT_PARAGRAPHS_PER_DOCUMENT = 6


def join_paragraphs(
    entries: Sequence[CorpusEntry], per_document: int = DEFAULT_PARAGRAPHS_PER_DOCUMENT
) -> tuple[list[CorpusEntry], dict[str, str]]:
    """Join runs of ``per_document`` consecutive same-title paragraphs into documents ``"{first id}+{n}"``.

    Returns the documents (paragraphs separated by a blank line) and paragraph id -> document id.

    Examples
    --------
    >>> paras = [CorpusEntry(f"A#{i}", f"p{i}.", "A") for i in range(3)] + [CorpusEntry("B#0", "q.", "B")]
    >>> docs, parent = join_paragraphs(paras, per_document=2)
    >>> [(d.id, d.text) for d in docs], parent["A#1"]
    ([('A#0+2', 'p0.\\n\\np1.'), ('A#2+1', 'p2.'), ('B#0+1', 'q.')], 'A#0+2')
    """
    if per_document < 1:
        raise ValueError(f"per_document must be positive, got {per_document}.")
    documents: list[CorpusEntry] = []
    parent: dict[str, str] = {}
    run: list[CorpusEntry] = []

    def flush() -> None:
        if run:
            doc_id = f"{run[0].id}+{len(run)}"
            documents.append(CorpusEntry(doc_id, "\n\n".join(e.text.strip() for e in run), run[0].title))
            parent.update({e.id: doc_id for e in run})
            run.clear()

    for entry in entries:
        if run and (entry.title != run[0].title or len(run) == per_document):
            flush()
        run.append(entry)
    flush()
    return documents, parent


def relabel_to_documents(questions: Sequence[CalibrationExample], parent: dict[str, str]) -> list[CalibrationExample]:
    """Replace paragraph gold ids by their document ids (gold texts are dropped, answers kept).

    Examples
    --------
    >>> ex = CalibrationExample("Who?", gold_ids=("A#1",), answers=("Rollo",))
    >>> relabel_to_documents([ex], {"A#1": "A#0+2"})[0].gold_ids
    ('A#0+2',)
    """
    out = []
    for q in questions:
        ids = tuple(dict.fromkeys(parent.get(g, g) for g in q.gold_ids))
        out.append(replace(q, gold_ids=ids, gold_texts=()))
    return out


def bundled_long_documents(
    per_document: int = DEFAULT_PARAGRAPHS_PER_DOCUMENT,
) -> tuple[list[CorpusEntry], list[CalibrationExample]]:
    """The bundled corpus as long documents, and the 705 answerable questions labelled with them.

    Examples
    --------
    >>> docs, questions = bundled_long_documents()
    >>> len(docs), len(questions), questions[0].gold_ids
    (199, 705, ('Normans#0+6',))
    """
    from .corpus import bundled_corpus, bundled_questions

    documents, parent = join_paragraphs(bundled_corpus(), per_document)
    return documents, relabel_to_documents(bundled_questions(True), parent)


def write_long_documents(out_dir: str | Path, per_document: int = DEFAULT_PARAGRAPHS_PER_DOCUMENT) -> tuple[Path, Path]:
    """Write :func:`bundled_long_documents` as ``long_corpus.jsonl`` and SQuAD-style ``long_qa.jsonl`` in ``out_dir``.

    Examples
    --------
    >>> import tempfile
    >>> corpus, qa = write_long_documents(tempfile.mkdtemp())
    >>> sum(1 for _ in corpus.open()), sum(1 for _ in qa.open())
    (199, 705)
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    documents, questions = bundled_long_documents(per_document)
    corpus_path, qa_path = out / "long_corpus.jsonl", out / "long_qa.jsonl"
    with corpus_path.open("w", encoding="utf-8") as f:
        for d in documents:
            f.write(json.dumps({"id": d.id, "text": d.text, "title": d.title}, ensure_ascii=False) + "\n")
    with qa_path.open("w", encoding="utf-8") as f:
        for q in questions:
            row = {"id": q.id, "question": q.question, "answers": list(q.answers), "context_id": q.gold_ids[0]}
            f.write(json.dumps(row | {"is_impossible": False}, ensure_ascii=False) + "\n")
    return corpus_path, qa_path
