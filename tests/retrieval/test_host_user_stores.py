"""The swaps on the stores and ids users already have (real MiniLM, bundled SQuAD subset, fixed seed).

* LlamaIndex: an index built with ``VectorStoreIndex.from_documents`` calibrates on the *document*
  ids (``ref_doc_id``); a split document's gold becomes its chunk that holds the answer.
* LangChain: ``InMemoryVectorStore`` (no relevance scores) calibrates and serves through
  ``ConformalRetriever`` and ``ConformalDocumentCompressor``, with its scale in the fingerprint.
* ``ConformalNodePostprocessor`` without ``index=`` refuses another embedding model and warns on
  a changed collection; the unchanged pipeline runs without either (negative control).
"""

from __future__ import annotations

import asyncio
import random
import warnings

import numpy as np
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document, MockEmbedding, Settings, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.core.errors import CalibrationError, CorpusChangedWarning, FingerprintMismatchError
from conformal_rag_plugins.core.quantile import conformal_rank
from conformal_rag_plugins.labelling.chunk_labels import answer_in_text
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.options import RetrievalOptions

pytestmark = pytest.mark.integration

SEED = 20260523
N_QUESTIONS = 80
N_CALIBRATION = 50
POOL = 20
CONFIDENCE = 0.8


@pytest.fixture(scope="module")
def subset(squad_questions, squad_entries):
    """80 seeded answerable questions, their paragraphs and 40 other paragraphs (distractors)."""
    questions = list(squad_questions)
    random.Random(SEED).shuffle(questions)
    questions = questions[:N_QUESTIONS]
    gold = {g for q in questions for g in q.gold_ids}
    others = [e for e in squad_entries if e.id not in gold]
    random.Random(SEED + 1).shuffle(others)
    entries = [e for e in squad_entries if e.id in gold] + others[:40]
    return questions, entries


@pytest.fixture(scope="module")
def li_embed():
    from conformal_rag_plugins.local.llamaindex_models import MiniLMEmbedding

    return MiniLMEmbedding()


@pytest.fixture(scope="module")
def lc_embed():
    from conformal_rag_plugins.local.langchain_models import MiniLMEmbeddings

    return MiniLMEmbeddings()


# --- LlamaIndex: document ids ------------------------------------------------------------------


@pytest.fixture(scope="module")
def split_index(subset, li_embed):
    """``from_documents`` with the corpus ids as document ids, split into ~64-token chunks."""
    _, entries = subset
    docs = [Document(id_=e.id, text=e.text) for e in entries]
    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    return VectorStoreIndex.from_documents(docs, embed_model=li_embed, transformations=[splitter])


def test_llamaindex_calibrates_on_document_ids_of_split_documents(subset, split_index):
    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

    questions, entries = subset
    node_ids = set(split_index.vector_store.data.embedding_dict)
    doc_of = split_index.vector_store.data.text_id_to_ref_doc_id
    assert len(node_ids) > len(entries)  # the documents were split
    assert not {g for q in questions for g in q.gold_ids} & node_ids  # gold ids are document ids only

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the all-chunks-fallback note
        cal = calibrate_retriever(
            split_index,
            questions[:N_CALIBRATION],
            confidence_level=CONFIDENCE,
            pool_size=POOL,
            options=RetrievalOptions(progress=False),
        )
    rules = cal.labels_["gold_rule"]
    assert sum(rules.values()) == N_CALIBRATION and rules.get("answer-in-chunk", 0) >= N_CALIBRATION // 2, rules

    # each example's gold is now chunks of its document; with the answer rule, chunks holding an answer
    from conformal_rag_plugins.llamaindex.host import gold_on_chunks

    texts = {n.node_id: n.get_content() for n in split_index.docstore.docs.values()}
    mapped = gold_on_chunks(ConformalRetriever(index=split_index, calibration=cal)._host, questions)
    for before, after in zip(questions, mapped, strict=True):
        assert set(after.gold_ids) <= node_ids and {doc_of[g] for g in after.gold_ids} == set(before.gold_ids)
        if after.metadata["gold_rule"] == "answer-in-chunk":
            assert all(answer_in_text(before.answers, texts[g]) for g in after.gold_ids)

    # held-out coverage of the served sets, inside the BetaBinomial slack of one calibration draw (a sanity
    # check: 30 held-out questions give a slack of about 0.27; measured 0.767 at target 0.8)
    retriever = ConformalRetriever(index=split_index, calibration=cal)
    held = mapped[N_CALIBRATION:]
    covered = [bool(set(ex.gold_ids) & {n.node.node_id for n in retriever.retrieve(ex.question)}) for ex in held]
    n_cal, n_test = cal.n_calibration_, len(held)
    k = conformal_rank(n_cal, 1 - CONFIDENCE)
    sd = np.sqrt(k * (n_cal + 1 - k) * (n_cal + 1 + n_test) / (n_test * (n_cal + 1) ** 2 * (n_cal + 2)))
    assert np.mean(covered) >= CONFIDENCE - 3 * sd, (np.mean(covered), sd)


def test_llamaindex_unknown_ids_still_refused(subset, split_index):
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    questions, _ = subset
    wrong = [type(q)(q.question, gold_ids=("no-such-document",)) for q in questions[:5]]
    with pytest.raises(CalibrationError, match="no-such-document"):
        calibrate_retriever(
            split_index,
            questions[:20] + wrong,
            pool_size=POOL,
            options=RetrievalOptions(progress=False),
        )


# --- LangChain: InMemoryVectorStore ------------------------------------------------------------


class DistanceStore(InMemoryVectorStore):
    """An in-memory store that, like many stores, reports a *distance* (1 - cosine; lower is better)."""

    def similarity_search_with_score(self, query, k=4, **kwargs):
        return [(d, 1.0 - s) for d, s in super().similarity_search_with_score(query, k=k, **kwargs)]

    async def asimilarity_search_with_score(self, query, k=4, **kwargs):
        return self.similarity_search_with_score(query, k=k, **kwargs)


def _filled(store_cls, entries, embeddings):
    store = store_cls(embeddings)
    store.add_documents([LCDocument(id=e.id, page_content=e.text) for e in entries])
    return store


@pytest.fixture(scope="module")
def memory_store(subset, lc_embed):
    return _filled(InMemoryVectorStore, subset[1], lc_embed)


def test_langchain_in_memory_store_calibrates_and_serves(subset, memory_store, lc_embed):
    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    questions, entries = subset
    cal = calibrate_retriever(
        memory_store,
        questions[:N_CALIBRATION],
        confidence_level=CONFIDENCE,
        pool_size=POOL,
        options=RetrievalOptions(progress=False),
    )
    fp = cal.fingerprint_
    assert (fp.store, fp.distance, fp.score_scale, fp.embedding_dim) == ("InMemoryVectorStore", "cosine", "cosine", 384)
    assert cal.corpus_["size"] == len(entries)
    cal = RetrievalCalibration.from_dict(cal.to_dict())  # the scale survives a save and load

    retriever = ConformalRetriever(vectorstore=memory_store, calibration=cal)
    for q in questions[N_CALIBRATION : N_CALIBRATION + 5]:
        raw = memory_store.similarity_search_with_score(q.question, k=POOL)  # cosine similarity, best first
        top = raw[0][1]
        want = [d.id for d, s in raw if s >= top - cal.threshold_]  # the "relative" family on the store's scale
        got = retriever.invoke(q.question)
        assert [d.id for d in got] == want
        assert [d.id for d in asyncio.run(retriever.ainvoke(q.question))] == want
        assert all(d.metadata["conformal_guaranteed"] for d in got)

    # a store whose similarity_search_with_score gives distances: read lower-is-better (negated)
    distance_store = _filled(DistanceStore, entries, lc_embed)
    dcal = calibrate_retriever(
        distance_store,
        questions[:N_CALIBRATION],
        confidence_level=CONFIDENCE,
        pool_size=POOL,
        options=RetrievalOptions(progress=False),
    )
    assert dcal.fingerprint_.score_scale == "-DistanceStore.similarity_search_with_score"
    assert dcal.threshold_ == pytest.approx(cal.threshold_, abs=1e-6)  # relative scores: the same rule
    q = questions[N_CALIBRATION].question
    assert [d.id for d in ConformalRetriever(vectorstore=distance_store, calibration=dcal).invoke(q)] == [
        d.id for d in retriever.invoke(q)
    ]

    # another scale is refused
    with pytest.raises(FingerprintMismatchError, match="score_scale"):
        ConformalRetriever(vectorstore=distance_store, calibration=cal)
    with pytest.raises(FingerprintMismatchError, match="score_scale"):
        ConformalRetriever(vectorstore=memory_store, calibration=dcal)


def test_langchain_in_memory_store_through_the_compressor(subset, memory_store, lc_embed):
    from langchain_classic.retrievers import ContextualCompressionRetriever

    from conformal_rag_plugins.langchain import ConformalDocumentCompressor, calibrate_compressor

    questions, entries = subset
    base = memory_store.as_retriever(search_kwargs={"k": POOL})
    cal = calibrate_compressor(
        base,
        questions[:N_CALIBRATION],
        embeddings=lc_embed,
        confidence_level=CONFIDENCE,
        options=RetrievalOptions(progress=False),
    )
    assert cal.fingerprint_.store == "InMemoryVectorStore" and cal.corpus_["size"] == len(entries)
    compressor = ConformalDocumentCompressor(calibration=cal, embeddings=lc_embed)
    pipeline = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusChangedWarning)  # negative control: the calibrated store is silent
        docs = pipeline.invoke(questions[N_CALIBRATION].question)
    assert 1 <= len(docs) <= POOL and all("conformal_threshold" in d.metadata for d in docs)

    # the same compressor on another collection (re-ingested under new ids) says so
    moved = InMemoryVectorStore(lc_embed)
    moved.add_documents([LCDocument(id=f"v2:{e.id}", page_content=e.text) for e in entries])
    other = ContextualCompressionRetriever(
        base_compressor=ConformalDocumentCompressor(calibration=cal, embeddings=lc_embed),
        base_retriever=moved.as_retriever(search_kwargs={"k": POOL}),
    )
    with pytest.warns(CorpusChangedWarning, match="not in the collection"):
        other.invoke(questions[N_CALIBRATION].question)


# --- LlamaIndex: the postprocessor without index= ----------------------------------------------


@pytest.fixture(scope="module")
def node_index(subset, li_embed):
    """A ``SimpleVectorStore`` index of one node per paragraph (ids = corpus ids)."""
    nodes = [TextNode(id_=e.id, text=e.text) for e in subset[1]]
    return VectorStoreIndex(nodes, embed_model=li_embed)


@pytest.fixture(scope="module")
def node_calibration(subset, node_index):
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    cal = calibrate_retriever(
        node_index,
        subset[0][:N_CALIBRATION],
        confidence_level=CONFIDENCE,
        pool_size=POOL,
        options=RetrievalOptions(progress=False),
    )
    return RetrievalCalibration.from_dict(cal.to_dict())  # as loaded from its file


def _engine(index, cal, **kwargs):
    from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor

    post = ConformalNodePostprocessor(calibration=cal, **kwargs)
    return index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=POOL, node_postprocessors=[post])


def test_postprocessor_unchanged_pipeline_runs_silently(subset, node_index, node_calibration):
    from conformal_rag_plugins.llamaindex import ConformalRetriever

    retriever = ConformalRetriever(index=node_index, calibration=node_calibration)
    engine = _engine(node_index, node_calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusChangedWarning)
        for q in subset[0][N_CALIBRATION : N_CALIBRATION + 5]:
            got = [n.node.node_id for n in engine.query(q.question).source_nodes]
            assert got == [n.node.node_id for n in retriever.retrieve(q.question)]


def test_postprocessor_without_index_refuses_another_embedding_model(subset, node_calibration):
    nodes = [TextNode(id_=e.id, text=e.text) for e in subset[1]]  # the same chunks and ids
    q = subset[0][N_CALIBRATION].question
    other = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=16))
    with pytest.raises(FingerprintMismatchError, match="dimension 16"):
        _engine(other, node_calibration).query(q)
    # same dimension, another model named in Settings: refused when the postprocessor is built
    previous = Settings._embed_model
    Settings.embed_model = MockEmbedding(embed_dim=384, model_name="another-384-model")
    try:
        with pytest.raises(FingerprintMismatchError, match="another-384-model"):
            _engine(VectorStoreIndex(nodes), node_calibration)
    finally:
        Settings._embed_model = previous


def test_postprocessor_without_index_warns_on_a_changed_corpus(subset, li_embed, node_calibration):
    # the same paragraphs re-indexed with from_documents: new node ids, so other pools
    docs = [Document(text=e.text) for e in subset[1]]
    reindexed = VectorStoreIndex.from_documents(docs, embed_model=li_embed)
    with pytest.warns(CorpusChangedWarning, match="not in the collection it was calibrated on"):
        _engine(reindexed, node_calibration).query(subset[0][N_CALIBRATION].question)


def test_postprocessor_refuses_scores_off_the_calibrated_scale(node_calibration):
    from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor

    post = ConformalNodePostprocessor(calibration=node_calibration)
    pool = node_calibration.pool_size_
    bm25_like = [NodeWithScore(node=TextNode(id_=f"n{i}", text="x"), score=9.0 - i / 10) for i in range(pool)]
    with pytest.raises(FingerprintMismatchError, match="outside"):
        post.postprocess_nodes(bm25_like, query_str="q")
    cosine = [NodeWithScore(node=TextNode(id_=f"n{i}", text="x"), score=0.9 - i / 100) for i in range(pool)]
    with pytest.warns(CorpusChangedWarning):  # in range, but ids the calibrated collection never held
        assert post.postprocess_nodes(cosine, query_str="q")
