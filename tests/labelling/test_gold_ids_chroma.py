"""The one gold-id rule on Chroma + MiniLM, both frameworks (issue 34): Chroma is asked for a document's chunks.

Small synthetic documents (12 documents, 3 chunks each); the unit tier covers the in-memory stores
and every ``calibrate*`` (tests/labelling/test_gold_ids.py).
"""

from __future__ import annotations

import pytest

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.labelling.chunk_records import Chunk
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.tuning.fusion_config import FusionConfig
from conformal_rag_plugins.tuning.options import TuningOptions

N_DOCS, N_SENT = 12, 6
ONE_ERROR = "neither as chunk ids nor as document ids"
OPTIONS = RetrievalOptions(confidence_level=0.8, progress=False)
TUNING = TuningOptions(grid=(FusionConfig("minmax", 0.5),), pool_sizes=(20,))


def _sentences(d: int) -> list[str]:
    return [f"Sentence {d}-{s} about topic{d} thing{s} and word{d * 7 + s}." for s in range(N_SENT)]


def _doc_examples(*, answers: bool) -> list[CalibrationExample]:
    return [
        CalibrationExample(
            f"Which word for topic{d} thing{s}?",
            gold_ids=(f"doc{d}",),
            answers=(f"word{d * 7 + s}",) if answers else (),
            id=f"q{d}-{s}",
        )
        for d in range(N_DOCS)
        for s in (1, 4)
    ]


def _with_bad_id(examples: list[CalibrationExample]) -> list[CalibrationExample]:
    return [CalibrationExample(examples[0].question, gold_ids=("no-such-doc",), id="bad"), *examples[1:]]


def _entries() -> list[Chunk]:
    return [
        Chunk(f"doc{d}::chunk{i // 2}", " ".join(_sentences(d)[i : i + 2]), parent_id=f"doc{d}")
        for d in range(N_DOCS)
        for i in range(0, N_SENT, 2)
    ]


pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::conformal_rag_plugins.core.errors.PoolMissWarning"),
]


@pytest.fixture(scope="module")
def li_chroma(chroma_memory_client):
    """A LlamaIndex Chroma index of split Documents (each node's ref_doc_id is its Document's id_)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    from conformal_rag_plugins.local.chroma import open_collection
    from conformal_rag_plugins.local.llamaindex_stack import index_nodes

    docs = [Document(text=" ".join(_sentences(d)), id_=f"doc{d}") for d in range(N_DOCS)]
    nodes = SentenceSplitter(chunk_size=30, chunk_overlap=0).get_nodes_from_documents(docs)
    _, collection = open_collection(chroma_memory_client, "gold-ids-li")
    return index_nodes(nodes, collection), nodes


def test_llamaindex_chroma_document_ids(li_chroma) -> None:
    from conformal_rag_plugins.llamaindex import calibrate_hybrid_retriever, calibrate_retriever

    index, nodes = li_chroma
    cal = calibrate_retriever(index, _doc_examples(answers=True), pool_size=20, options=OPTIONS)
    assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}
    _, tuned = calibrate_hybrid_retriever(
        index, nodes, _doc_examples(answers=False), pool_size=20, options=OPTIONS, tuning=TUNING
    )
    assert tuned.labels_["gold_rule"] == {"all-chunks-fallback": 24}
    with pytest.raises(CalibrationError, match=ONE_ERROR):
        calibrate_retriever(index, _with_bad_id(_doc_examples(answers=True)), pool_size=20, options=OPTIONS)


def test_llamaindex_library_chroma_index_document_ids(chroma_memory_client) -> None:
    from conformal_rag_plugins.llamaindex import calibrate_retriever
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index

    index, _ = build_chroma_index(_entries(), client=chroma_memory_client, collection_name="gold-ids-li-lib")
    cal = calibrate_retriever(index, _doc_examples(answers=True), pool_size=20, options=OPTIONS)
    assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}


def test_langchain_chroma_document_ids(chroma_memory_client) -> None:
    from langchain_chroma import Chroma
    from langchain_core.documents import Document

    from conformal_rag_plugins.langchain import calibrate_compressor, calibrate_hybrid_retriever, calibrate_retriever
    from conformal_rag_plugins.local.langchain_models import MiniLMEmbeddings

    chunks = [Document(c.text, id=c.id, metadata={"doc_id": c.parent_id}) for c in _entries()]
    store = Chroma(client=chroma_memory_client, collection_name="gold-ids-lc", embedding_function=MiniLMEmbeddings(),
                   collection_metadata={"hnsw:space": "cosine"})  # fmt: skip
    store.add_documents(chunks, ids=[c.id for c in chunks])
    cal = calibrate_retriever(store, _doc_examples(answers=True), pool_size=20, options=OPTIONS)
    assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}
    base = store.as_retriever(search_kwargs={"k": 20})
    comp = calibrate_compressor(base, _doc_examples(answers=False), embeddings=store.embeddings, options=OPTIONS)
    assert comp.labels_["gold_rule"] == {"all-chunks-fallback": 24}
    _, tuned = calibrate_hybrid_retriever(
        store, chunks, _doc_examples(answers=True), pool_size=20, options=OPTIONS, tuning=TUNING
    )
    assert tuned.labels_["gold_rule"] == {"answer-in-chunk": 24}
    with pytest.raises(CalibrationError, match=ONE_ERROR):
        calibrate_retriever(store, _with_bad_id(_doc_examples(answers=True)), pool_size=20, options=OPTIONS)


def test_langchain_library_chroma_store_document_ids(chroma_memory_client) -> None:
    from conformal_rag_plugins.langchain import calibrate_retriever
    from conformal_rag_plugins.local.langchain_stack import build_chroma_vectorstore

    store = build_chroma_vectorstore(_entries(), client=chroma_memory_client, collection_name="gold-ids-lc-lib")
    cal = calibrate_retriever(store, _doc_examples(answers=True), pool_size=20, options=OPTIONS)
    assert cal.labels_["gold_rule"] == {"answer-in-chunk": 24}
