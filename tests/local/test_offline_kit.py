"""The public offline kit (``conformal_rag_plugins.local``): truncation is never silent, ids are stable.

The embeddings run on a fake encoder (a hashed bag of words, 384 dimensions), so no model is loaded;
the MiniLM tokenizer (a few megabytes, loaded offline) counts the word pieces as in production.
"""

from __future__ import annotations

import hashlib
import re
import warnings

import numpy as np
import pytest

import conformal_rag_plugins.local as kit
from conformal_rag_plugins.local.langchain_models import MiniLMEmbeddings, recursive_splitter
from conformal_rag_plugins.local.llamaindex_models import MiniLMEmbedding, sentence_splitter
from conformal_rag_plugins.local.tokens import TruncationWarning, count_tokens, silenced_truncation

SHORT = "Rollo was the Viking leader who founded the duchy of Normandy in 911."
LONG = " ".join(f"Sentence {i} tells how the Normans crossed the Channel and won at Hastings." for i in range(40))
TOPICS = ["Normans Normandy Rollo", "Seine river Paris", "Hastings battle 1066", "Vikings ships raids", "Paris kings"]


class FakeEncoder:
    """A hashed bag of words: normalised, deterministic, no model."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    dimension = 384
    max_seq_length = 256

    def encode(self, texts, **_: object) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.sha1(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


def _truncation_warnings(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [w for w in caught if issubclass(w.category, TruncationWarning)]


def _long_documents() -> list[str]:
    return [LONG, SHORT, LONG + " More.", SHORT + " Again.", LONG + " The end."]


# --- the public names -------------------------------------------------------------------------------------------


def test_the_kit_exports_its_names_and_they_work_together() -> None:
    assert sorted(kit.__all__) == sorted(
        ["MiniLMEmbedding", "MiniLMEmbeddings", "minilm_tokenizer", "count_tokens", "sentence_splitter",
         "recursive_splitter", "llamaindex_llm", "langchain_llm", "bundled_corpus", "bundled_questions",
         "write_bundled_articles", "TruncationWarning"]
    )  # fmt: skip
    for name in kit.__all__:
        assert getattr(kit, name) is not None
    assert kit.MiniLMEmbedding is MiniLMEmbedding and kit.MiniLMEmbeddings is MiniLMEmbeddings
    assert issubclass(kit.TruncationWarning, UserWarning)
    from conformal_rag_plugins.langchain import MiniLMEmbeddings as from_langchain
    from conformal_rag_plugins.llamaindex import MiniLMEmbedding as from_llamaindex
    from conformal_rag_plugins.local import langchain_models, llamaindex_models

    assert from_llamaindex is MiniLMEmbedding and from_langchain is MiniLMEmbeddings
    assert llamaindex_models.local_llm is kit.llamaindex_llm and langchain_models.local_llm is kit.langchain_llm


def test_minilm_tokenizer_measures_chunks_for_both_frameworks_splitters() -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from llama_index.core.node_parser import SentenceSplitter

    tokenizer = kit.minilm_tokenizer()
    assert len(tokenizer.tokenize(LONG)) == count_tokens(LONG) > 254
    langchain = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(tokenizer, chunk_size=100, chunk_overlap=10)
    llamaindex = SentenceSplitter(chunk_size=100, chunk_overlap=10, tokenizer=tokenizer.tokenize)
    for pieces in (langchain.split_text(LONG), llamaindex.split_text(LONG)):
        assert len(pieces) > 2 and max(count_tokens(p) for p in pieces) <= 100


def test_importing_the_kit_imports_no_framework_until_a_framework_name_is_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import conformal_rag_plugins.local as kit\n"
        "loaded = lambda: [f for f in ('llama_index', 'langchain') if any(m.startswith(f) for m in sys.modules)]\n"
        "print(loaded())\n"
        "kit.sentence_splitter\n"
        "print(loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "['llama_index']"], out.stdout


# --- truncation is never silent ---------------------------------------------------------------------------------


def test_llamaindex_embedding_warns_once_with_the_count_over_every_batch_at_the_users_line() -> None:
    """``from_documents`` embeds in batches of 2 here; the one warning counts the 3 long texts of all 5."""
    from llama_index.core import Document, VectorStoreIndex

    embed = MiniLMEmbedding(encoder=FakeEncoder(), embed_batch_size=2)
    docs = [Document(id_=f"d{i}", text=t) for i, t in enumerate(_long_documents())]
    caught = _truncation_warnings(lambda: VectorStoreIndex.from_documents(docs, embed_model=embed))
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert message.startswith("3 of 5 texts exceed the 254-token window of all-MiniLM-L6-v2"), message
    assert "conformal_rag_plugins.local.sentence_splitter()" in message and "recursive_splitter()" in message
    assert caught[0].filename == __file__  # the user's line, not LlamaIndex's
    # once per instance: more long texts, no second warning
    assert _truncation_warnings(lambda: embed.get_text_embedding_batch([LONG, LONG])) == []
    assert _truncation_warnings(lambda: embed.get_text_embedding(LONG)) == []
    # a new instance warns again, also for a single text
    assert len(_truncation_warnings(lambda: MiniLMEmbedding(encoder=FakeEncoder()).get_text_embedding(LONG))) == 1


def test_langchain_embeddings_warn_once_with_the_count() -> None:
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    embeddings = MiniLMEmbeddings(encoder=FakeEncoder())
    store = InMemoryVectorStore(embeddings)
    docs = [Document(t, id=f"d{i}") for i, t in enumerate(_long_documents())]
    caught = _truncation_warnings(lambda: store.add_documents(docs))
    assert len(caught) == 1 and str(caught[0].message).startswith("3 of 5 texts exceed the 254-token window")
    assert caught[0].filename == __file__
    assert _truncation_warnings(lambda: embeddings.embed_documents([LONG])) == []


def test_short_texts_and_split_documents_do_not_warn_and_a_silenced_build_does_not_use_up_the_warning() -> None:
    from langchain_core.documents import Document

    embeddings = MiniLMEmbeddings(encoder=FakeEncoder())
    chunks = recursive_splitter().split_documents([Document(t, id=f"d{i}") for i, t in enumerate(_long_documents())])
    assert _truncation_warnings(lambda: embeddings.embed_documents([c.page_content for c in chunks])) == []
    with silenced_truncation():
        assert _truncation_warnings(lambda: embeddings.embed_documents([LONG])) == []
    assert len(_truncation_warnings(lambda: embeddings.embed_documents([LONG]))) == 1


def test_the_warning_names_no_module_that_does_not_exist() -> None:
    """The old message sent users to ``calibration.chunk_labels.map_gold_to_chunks`` (no such module)."""
    (caught,) = _truncation_warnings(lambda: MiniLMEmbeddings(encoder=FakeEncoder()).embed_documents([LONG]))
    for dotted in re.findall(r"conformal_rag_plugins(?:\.\w+)+", str(caught.message)):
        module, _, name = dotted.rpartition(".")
        assert hasattr(__import__(module, fromlist=[name]), name), dotted


# --- stable ids ------------------------------------------------------------------------------------------------


def _llamaindex_index(documents: list[str], *, with_ids: bool):
    from llama_index.core import Document, VectorStoreIndex

    docs = [Document(id_=f"doc{i}", text=t) if with_ids else Document(text=t) for i, t in enumerate(documents)]
    embed = MiniLMEmbedding(encoder=FakeEncoder())
    return VectorStoreIndex.from_documents(docs, transformations=[sentence_splitter(60)], embed_model=embed)


def _node_ids(index) -> list[str]:
    return sorted(index.docstore.docs)


@pytest.mark.parametrize("with_ids", [True, False], ids=["document-ids", "random-document-ids"])
def test_sentence_splitter_gives_the_same_node_ids_on_every_rebuild(with_ids: bool) -> None:
    documents = [f"{topic}. " + LONG for topic in TOPICS]
    first, second = _llamaindex_index(documents, with_ids=with_ids), _llamaindex_index(documents, with_ids=with_ids)
    assert _node_ids(first) == _node_ids(second)
    assert len(_node_ids(first)) > len(documents)  # split
    if with_ids:
        node = first.docstore.get_node("doc0::chunk1")
        assert node.ref_doc_id == "doc0"


def test_a_rebuilt_llamaindex_index_is_not_a_changed_corpus() -> None:
    """Calibrate on one build, serve from a rebuild of the same documents: no ``CorpusChangedWarning``.

    With LlamaIndex's random node ids (the splitter without ``id_func``) the rebuild warns.
    """
    from conformal_rag_plugins import CalibrationExample, CorpusChangedWarning, RetrievalOptions
    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

    documents = [f"{topic} " * 3 + f"part {k}. " + LONG for k in range(8) for topic in TOPICS]
    examples = [
        CalibrationExample(f"{TOPICS[i % len(TOPICS)]} part {i % 8}", gold_ids=(f"doc{i}",), id=f"q{i}")
        for i in range(len(documents))
    ]
    built = _llamaindex_index(documents, with_ids=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the all-chunks-fallback note: gold are whole documents
        cal = calibrate_retriever(built, examples, pool_size=20, options=RetrievalOptions(0.8, progress=False))
    rebuilt = _llamaindex_index(documents, with_ids=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusChangedWarning)
        retriever = ConformalRetriever(retriever=rebuilt.as_retriever(similarity_top_k=20), calibration=cal)
        assert retriever.retrieve(examples[0].question)


def test_recursive_splitter_chunks_keep_their_document_id_and_stable_ids() -> None:
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    def build() -> tuple[list[Document], list[str]]:
        docs = [Document(LONG, id="normans"), Document(SHORT, metadata={"doc_id": "rollo"}), Document(LONG + " x")]
        chunks = recursive_splitter(60).split_documents(docs)
        store = InMemoryVectorStore(MiniLMEmbeddings(encoder=FakeEncoder()))
        return chunks, store.add_documents(chunks)

    chunks, ids = build()
    assert ids == build()[1] == [c.id for c in chunks]
    assert [c.metadata["doc_id"] for c in chunks if c.id.startswith("normans::")] == ["normans"] * sum(
        1 for c in chunks if c.id.startswith("normans::")
    )
    assert chunks[0].id == "normans::chunk0" and "normans::chunk1" in ids
    assert "rollo::chunk0" in ids and {c.metadata["doc_id"] for c in chunks} >= {"normans", "rollo"}
    unnamed = [c for c in chunks if c.metadata["doc_id"] not in ("normans", "rollo")]
    assert unnamed and all(c.id == f"{c.metadata['doc_id']}::chunk{i}" for i, c in enumerate(unnamed))
    # transform_documents (a document transformer in a LangChain pipeline) goes through the same path
    assert [c.id for c in recursive_splitter(60).transform_documents([Document(LONG, id="normans")])][:1] == [
        "normans::chunk0"
    ]


def test_a_parent_document_retriever_with_the_kit_splitter_gets_the_same_chunk_ids_on_every_rebuild() -> None:
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_core.documents import Document
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore

    def build() -> list[str]:
        store = InMemoryVectorStore(MiniLMEmbeddings(encoder=FakeEncoder()))
        retriever = ParentDocumentRetriever(
            vectorstore=store, docstore=InMemoryStore(), child_splitter=recursive_splitter(60)
        )
        retriever.add_documents([Document(f"{t}. {LONG}", id=f"doc{i}") for i, t in enumerate(TOPICS)],
                                ids=[f"doc{i}" for i in range(len(TOPICS))])  # fmt: skip
        assert {row["metadata"]["doc_id"] for row in store.store.values()} == {f"doc{i}" for i in range(len(TOPICS))}
        return sorted(store.store)

    first = build()
    assert first == build() and "doc0::chunk0" in first
