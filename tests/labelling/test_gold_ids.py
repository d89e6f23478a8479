"""One gold-id rule in every ``calibrate*`` of both adapters (issue 34).

Gold ids may be (1) chunk/node ids, (2) document ids with answers (moved onto the chunks holding
an answer), (3) document ids without answers (all of the document's chunks); anything else raises
the one error naming the three forms. Small real LlamaIndex / LangChain stores over a
deterministic bag-of-words embedding, so no model is loaded.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/datasets/gold_ids.py
#   conformal_rag_plugins/langchain/calibrate.py
#   conformal_rag_plugins/langchain/fingerprint.py
#   conformal_rag_plugins/langchain/fusion_fanout.py
#   conformal_rag_plugins/langchain/retrieval_host.py
#   conformal_rag_plugins/langchain/tuned_units.py
#   conformal_rag_plugins/llamaindex/calibrate.py
#   conformal_rag_plugins/llamaindex/fingerprint.py
#   conformal_rag_plugins/llamaindex/retrieval_host.py
#   conformal_rag_plugins/llamaindex/tuned_units.py

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models import FakeListChatModel
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter

from conformal_rag_plugins.answer_sets.options import RetrievalStageOptions, SamplingOptions
from conformal_rag_plugins.core.errors import CalibrationError, CoverageCeilingWarning
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.tuning.fusion_config import FusionConfig
from conformal_rag_plugins.tuning.options import TuningOptions

from ..fake_embeddings import HashEmbedding, HashEmbeddings

N_DOCS, N_SENT = 12, 6
ONE_ERROR = "neither as chunk ids nor as document ids"
OPTIONS = RetrievalOptions(confidence_level=0.8, progress=False)
TUNING = TuningOptions(grid=(FusionConfig("minmax", 0.5),), pool_sizes=(20,))
pytestmark = pytest.mark.filterwarnings("ignore::conformal_rag_plugins.core.errors.PoolMissWarning")


#: Fake LLMs exercise control flow here: no pilot (its stop is tested in tests/answer_sets).
SAMPLING = SamplingOptions(n_samples=4, progress=False, pilot=None)


def _sentences(d: int) -> list[str]:
    return [f"Sentence {d}-{s} about topic{d} thing{s} and word{d * 7 + s}." for s in range(N_SENT)]


def _answer(d: int, s: int) -> str:
    return f"word{d * 7 + s}"


def _doc_examples(*, answers: bool) -> list[CalibrationExample]:
    out = []
    for d in range(N_DOCS):
        for s in (1, 4):
            out.append(
                CalibrationExample(
                    f"Which word for topic{d} thing{s}?",
                    gold_ids=(f"doc{d}",),
                    answers=(_answer(d, s),) if answers else (),
                    id=f"q{d}-{s}",
                )
            )
    return out


def _with_bad_id(examples: list[CalibrationExample]) -> list[CalibrationExample]:
    return [replace(examples[0], gold_ids=("no-such-doc",)), *examples[1:]]


def _chunk_examples(chunk_of: dict[tuple[int, int], str]) -> list[CalibrationExample]:
    pairs = zip(_doc_examples(answers=True), _keys(), strict=True)
    return [replace(ex, gold_ids=(chunk_of[(d, s)],)) for ex, (d, s) in pairs]


def _keys() -> list[tuple[int, int]]:
    return [(d, s) for d in range(N_DOCS) for s in (1, 4)]


# ---------------------------------------------------------------------------------------------- LlamaIndex


@pytest.fixture(scope="module")
def li():
    docs = [Document(text=" ".join(_sentences(d)), id_=f"doc{d}") for d in range(N_DOCS)]
    splitter = SentenceSplitter(chunk_size=30, chunk_overlap=0)
    nodes = splitter.get_nodes_from_documents(docs)
    assert len(nodes) > N_DOCS  # every document is split
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding())
    chunk_of = {}
    for d, s in _keys():
        chunk_of[(d, s)] = next(n.node_id for n in nodes if n.ref_doc_id == f"doc{d}" and _answer(d, s) in n.text)
    return index, nodes, docs, chunk_of


def _li_calibrate(kind: str, li, examples):
    from conformal_rag_plugins.llamaindex import calibrate_answer_sets, calibrate_hybrid_retriever, calibrate_retriever

    index, nodes, docs, _ = li
    if kind == "retriever":
        return calibrate_retriever(index, examples, pool_size=20, options=OPTIONS)
    if kind == "hybrid":
        return calibrate_hybrid_retriever(index, nodes, examples, pool_size=20, options=OPTIONS, tuning=TUNING)[1]
    if kind == "answer_sets":
        with warnings.catch_warnings():  # MockLLM / a fixed reply answer nothing: the ceiling is 0
            warnings.simplefilter("ignore", CoverageCeilingWarning)
            return calibrate_answer_sets(
                index, MockLLM(max_tokens=2), examples, confidence_level=0.6,
                sampling=SAMPLING, retrieval=RetrievalStageOptions(pool_size=20),
            ).retrieval_  # fmt: skip
    assert kind == "parents"
    return calibrate_retriever(index, examples, pool_size=20, options=OPTIONS, parents=docs)


LI_KINDS = ["retriever", "hybrid", "answer_sets", "parents"]
CHUNK_LEVEL = {"retriever", "hybrid", "answer_sets", "compressor"}


@pytest.mark.parametrize("kind", LI_KINDS)
def test_llamaindex_document_ids_with_answers(li, kind: str) -> None:
    cal = _li_calibrate(kind, li, _doc_examples(answers=True))
    if kind in CHUNK_LEVEL:
        assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}


@pytest.mark.parametrize("kind", [k for k in LI_KINDS if k != "answer_sets"])  # answer sets need answers
def test_llamaindex_document_ids_without_answers(li, kind: str) -> None:
    cal = _li_calibrate(kind, li, _doc_examples(answers=False))
    if kind in CHUNK_LEVEL:
        assert set(cal.labels_["gold_rule"]) == {"all-chunks-fallback"}


@pytest.mark.parametrize("kind", LI_KINDS)
def test_llamaindex_chunk_ids(li, kind: str) -> None:
    cal = _li_calibrate(kind, li, _chunk_examples(li[3]))
    assert cal.n_calibration_ > 0


@pytest.mark.parametrize("kind", LI_KINDS)
def test_llamaindex_a_bad_id_gives_the_one_message(li, kind: str) -> None:
    with pytest.raises(CalibrationError, match=ONE_ERROR) as info:
        _li_calibrate(kind, li, _with_bad_id(_doc_examples(answers=True)))
    assert "'no-such-doc'" in str(info.value) and "ref_doc_id" in str(info.value)
    assert "(2) document ids with answers=" in str(info.value)


def test_llamaindex_answer_sets_reuse_a_retrieval_calibration_made_on_document_ids(li) -> None:
    """The natural flow: calibrate_retriever on document-id gold, then answer sets with that calibration."""
    from conformal_rag_plugins.llamaindex import calibrate_answer_sets, calibrate_retriever

    index = li[0]
    examples = _doc_examples(answers=True)
    cal = calibrate_retriever(index, examples, pool_size=20, options=OPTIONS)
    with pytest.warns(CoverageCeilingWarning):
        both = calibrate_answer_sets(
            index, MockLLM(max_tokens=2), examples, confidence_level=0.6,
            sampling=SAMPLING, retrieval=RetrievalStageOptions(calibration=cal),
        )  # fmt: skip
    assert both.question_ids_ == cal.question_ids_ and both.retrieval_.threshold_ == cal.threshold_


# ----------------------------------------------------------------------------------------------- LangChain


@pytest.fixture(scope="module")
def lc():
    chunks, parents, chunk_of = [], {}, {}
    for d in range(N_DOCS):
        sents = _sentences(d)
        parents[f"doc{d}"] = LCDocument(" ".join(sents), id=f"doc{d}")
        for i in range(0, N_SENT, 2):
            cid = f"doc{d}::chunk{i // 2}"
            chunks.append(LCDocument(" ".join(sents[i : i + 2]), id=cid, metadata={"doc_id": f"doc{d}"}))
            for s in (i, i + 1):
                chunk_of[(d, s)] = cid
    store = InMemoryVectorStore(HashEmbeddings())
    store.add_documents(chunks)
    return store, chunks, parents, chunk_of


def _lc_calibrate(kind: str, lc, examples):
    from conformal_rag_plugins.langchain import (
        calibrate_answer_sets,
        calibrate_compressor,
        calibrate_hybrid_retriever,
        calibrate_retriever,
    )

    store, chunks, parents, _ = lc
    if kind == "retriever":
        return calibrate_retriever(store, examples, pool_size=20, options=OPTIONS)
    if kind == "compressor":
        base = store.as_retriever(search_kwargs={"k": 20})
        return calibrate_compressor(base, examples, embeddings=HashEmbeddings(), options=OPTIONS)
    if kind == "hybrid":
        return calibrate_hybrid_retriever(store, chunks, examples, pool_size=20, options=OPTIONS, tuning=TUNING)[1]
    if kind == "answer_sets":
        with warnings.catch_warnings():  # MockLLM / a fixed reply answer nothing: the ceiling is 0
            warnings.simplefilter("ignore", CoverageCeilingWarning)
            return calibrate_answer_sets(
                store, FakeListChatModel(responses=["nothing"]), examples, confidence_level=0.6,
                sampling=SAMPLING, retrieval=RetrievalStageOptions(pool_size=20),
            ).retrieval_  # fmt: skip
    assert kind == "parents"
    return calibrate_retriever(store, examples, pool_size=20, options=OPTIONS, parents=parents)


LC_KINDS = ["retriever", "compressor", "hybrid", "answer_sets", "parents"]


@pytest.mark.parametrize("kind", LC_KINDS)
def test_langchain_document_ids_with_answers(lc, kind: str) -> None:
    cal = _lc_calibrate(kind, lc, _doc_examples(answers=True))
    if kind in CHUNK_LEVEL:
        assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}


@pytest.mark.parametrize("kind", [k for k in LC_KINDS if k != "answer_sets"])
def test_langchain_document_ids_without_answers(lc, kind: str) -> None:
    cal = _lc_calibrate(kind, lc, _doc_examples(answers=False))
    if kind in CHUNK_LEVEL:
        assert set(cal.labels_["gold_rule"]) == {"all-chunks-fallback"}


@pytest.mark.parametrize("kind", LC_KINDS)
def test_langchain_chunk_ids(lc, kind: str) -> None:
    cal = _lc_calibrate(kind, lc, _chunk_examples(lc[3]))
    assert cal.n_calibration_ > 0


@pytest.mark.parametrize("kind", LC_KINDS)
def test_langchain_a_bad_id_gives_the_one_message(lc, kind: str) -> None:
    with pytest.raises(CalibrationError, match=ONE_ERROR) as info:
        _lc_calibrate(kind, lc, _with_bad_id(_doc_examples(answers=True)))
    assert "'no-such-doc'" in str(info.value) and 'metadata["doc_id"]' in str(info.value)
    assert "(3) document ids without answers" in str(info.value)


def test_langchain_answer_sets_reuse_a_retrieval_calibration_made_on_document_ids(lc) -> None:
    from conformal_rag_plugins.langchain import calibrate_answer_sets, calibrate_retriever

    store = lc[0]
    examples = _doc_examples(answers=True)
    cal = calibrate_retriever(store, examples, pool_size=20, options=OPTIONS)
    with pytest.warns(CoverageCeilingWarning):
        both = calibrate_answer_sets(
            store, FakeListChatModel(responses=["nothing"]), examples, confidence_level=0.6,
            sampling=SAMPLING, retrieval=RetrievalStageOptions(calibration=cal),
        )  # fmt: skip
    assert both.question_ids_ == cal.question_ids_ and both.retrieval_.threshold_ == cal.threshold_


def test_a_store_that_cannot_list_a_documents_chunks_says_so() -> None:
    from conformal_rag_plugins.labelling.gold_ids import GoldLookup, gold_on_chunks

    lookup = GoldLookup(lambda ids: {i for i in ids if "::" in i}, lambda docs: None, "the key K")
    with pytest.raises(CalibrationError, match="cannot list the chunks of a document") as info:
        gold_on_chunks([CalibrationExample("q", gold_ids=("doc1", "doc1::chunk0"))], lookup)
    assert "1 chunk id(s)" in str(info.value) and "the key K" in str(info.value)


def test_the_answer_sets_hint_names_other_ids_for_the_same_questions(li) -> None:
    """The stages' check is kept; when it fails because the ids differ, the message says so."""
    from conformal_rag_plugins.answer_sets.stages import align_stages
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    examples = _doc_examples(answers=True)
    cal = calibrate_retriever(li[0], [replace(ex, id=None) for ex in examples], pool_size=20, options=OPTIONS)
    with pytest.raises(CalibrationError, match="same question text as a calibration question but another id"):
        align_stages(cal, examples)


def _entries():
    from conformal_rag_plugins.labelling.chunk_records import Chunk

    return [
        Chunk(f"doc{d}::chunk{i // 2}", " ".join(_sentences(d)[i : i + 2]), parent_id=f"doc{d}")
        for d in range(N_DOCS)
        for i in range(0, N_SENT, 2)
    ]


def test_llamaindex_reads_the_library_builders_parent_id() -> None:
    """Nodes of ``nodes_from_entries`` (the library's own builders) name their document in metadata["parent_id"]."""
    from conformal_rag_plugins.llamaindex import calibrate_retriever
    from conformal_rag_plugins.local.llamaindex_stack import nodes_from_entries

    index = VectorStoreIndex(nodes_from_entries(_entries()), embed_model=HashEmbedding())
    cal = calibrate_retriever(index, _doc_examples(answers=True), pool_size=20, options=OPTIONS)
    assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}


def test_langchain_reads_the_library_builders_parent_id() -> None:
    from conformal_rag_plugins.langchain import calibrate_retriever

    store = InMemoryVectorStore(HashEmbeddings())
    store.add_documents([LCDocument(c.text, id=c.id, metadata={"parent_id": c.parent_id}) for c in _entries()])
    cal = calibrate_retriever(store, _doc_examples(answers=False), pool_size=20, options=OPTIONS)
    assert cal.labels_["gold_rule"] == {"all-chunks-fallback": 24}


def test_llamaindex_parent_level_document_ids_with_answers_keep_the_answering_parents() -> None:
    """Hierarchical parents: a document id becomes its parents holding an answer (all of them without answers)."""
    from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from conformal_rag_plugins.llamaindex import LlamaIndexHost
    from conformal_rag_plugins.retrieval.host import Parents

    docs = [Document(text=" ".join(_sentences(d)), id_=f"doc{d}") for d in range(N_DOCS)]
    nodes = HierarchicalNodeParser.from_defaults(chunk_sizes=[64, 24], chunk_overlap=0).get_nodes_from_documents(docs)
    docstore = SimpleDocumentStore()
    docstore.add_documents(nodes)
    index = VectorStoreIndex(get_leaf_nodes(nodes), embed_model=HashEmbedding())
    host = LlamaIndexHost.of(index, pool_size=20, parents=Parents(docstore))
    with_answers = host.prepare_gold(_doc_examples(answers=True))
    without = host.prepare_gold(_doc_examples(answers=False))
    for ex, (d, s) in zip(with_answers, _keys(), strict=True):
        assert ex.gold_ids and all(_answer(d, s) in docstore.get_node(p).text for p in ex.gold_ids)
    assert all(len(a.gold_ids) < len(b.gold_ids) for a, b in zip(with_answers, without, strict=True))


def test_answer_sets_on_a_subset_of_the_retrieval_calibrations_document_id_questions(lc) -> None:
    """Retrieval calibrated on every question (document ids), the costly generator stage on a subset of them."""
    from conformal_rag_plugins.langchain import calibrate_answer_sets, calibrate_retriever

    store = lc[0]
    examples = _doc_examples(answers=True)
    cal = calibrate_retriever(store, examples, pool_size=20, options=OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageCeilingWarning)
        both = calibrate_answer_sets(
            store, FakeListChatModel(responses=["nothing"]), examples[:12], confidence_level=0.6,
            sampling=SAMPLING, retrieval=RetrievalStageOptions(calibration=cal),
        )  # fmt: skip
    assert both.question_ids_ == tuple(ex.digest for ex in examples[:12]) == both.retrieval_.question_ids_


def test_disjoint_questions_are_still_refused_and_the_message_says_how_many(li) -> None:
    from conformal_rag_plugins.answer_sets.stages import align_stages
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    examples = _doc_examples(answers=True)
    cal = calibrate_retriever(li[0], examples[:12], pool_size=20, options=OPTIONS)
    with pytest.raises(CalibrationError, match=r"recorded 12 questions, none of these 12.*or a subset of them"):
        align_stages(cal, examples[12:])
