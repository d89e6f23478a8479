"""One-line swap in an LCEL RAG chain: ``EmbeddingsFilter`` -> ``ConformalDocumentCompressor``.

The pattern is ``ContextualCompressionRetriever(base_compressor=..., base_retriever=store.as_retriever(...))``
feeding ``{"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm``, over
the bundled SQuAD subset in Chroma with MiniLM embeddings; only the compressor line changes.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import EmbeddingsFilter
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from conformal_rag_plugins.core.errors import ConformalError, FingerprintMismatchError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.langchain import ConformalDocumentCompressor, calibrate_compressor
from conformal_rag_plugins.langchain.compressor import score_documents
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import ServingOptions

from ..dropin_checks import assert_covers_within_3_sd, assert_split_rule_covers

pytestmark = pytest.mark.integration

CONFIDENCE = 0.9
POOL = 50


@pytest.fixture(scope="module")
def embeddings(lc_store):
    return lc_store.embeddings


@pytest.fixture(scope="module")
def base(lc_store):
    return lc_store.as_retriever(search_kwargs={"k": POOL})


@pytest.fixture(scope="module")
def calibration(base, embeddings, dropin_examples):
    """Calibrated through the same compression pipeline (base retriever + the compressor's cosine)."""
    return calibrate_compressor(
        base,
        dropin_examples,
        embeddings=embeddings,
        confidence_level=CONFIDENCE,
        options=RetrievalOptions(progress=False),
    )


def _compression(base, compressor) -> ContextualCompressionRetriever:
    return ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)


def _chain(retriever):
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["Rollo"])
    context = retriever | (lambda docs: "\n\n".join(d.page_content for d in docs))
    return {"context": context, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()


def test_one_line_swap_covers_held_out_questions(base, embeddings, calibration, squad_questions, dropin_split):
    before = _compression(base, EmbeddingsFilter(embeddings=embeddings, similarity_threshold=0.5))
    after = _compression(base, ConformalDocumentCompressor(calibration=calibration, embeddings=embeddings))
    assert _chain(before).invoke("Who led the Norse?") == _chain(after).invoke("Who led the Norse?") == "Rollo"
    covered, sizes, observations = [], [], []
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        docs = after.invoke(ex.question)
        ids = [d.id for d in docs]
        covered.append(any(g in ids for g in ex.gold_ids))
        sizes.append(len(ids))
        assert all(d.metadata["conformal_threshold"] == calibration.threshold_ for d in docs)
        # the pool the compressor saw, scored as at calibration: the held-out rows for the split check below
        pool = base.invoke(ex.question)
        scores = score_documents(ex.question, pool, embeddings)
        order = np.argsort(-scores, kind="stable")
        gold = tuple(int(p) for p, j in enumerate(order) if pool[j].id in ex.gold_ids)
        observations.append(PoolObservation(scores[order], gold))
        assert observations[-1].covered_and_size("relative", calibration.threshold_) == (covered[-1], len(ids))
    assert_covers_within_3_sd(covered, calibration.n_calibration_, 1 - CONFIDENCE)
    assert 1.0 <= float(np.mean(sizes)) < POOL / 5, np.mean(sizes)  # keeping the whole pool would fail this
    # over 300 seeded calibration/test splits of the held-out pools the same rule covers >= 1 - alpha - 0.01
    assert_split_rule_covers(observations, 1 - CONFIDENCE)


def test_async_and_batch_match_sync(base, embeddings, calibration, squad_questions, dropin_split):
    retriever = _compression(base, ConformalDocumentCompressor(calibration=calibration, embeddings=embeddings))
    questions = [squad_questions[i].question for i in dropin_split.held_out[:4]]
    want = [[d.id for d in retriever.invoke(q)] for q in questions]
    got = asyncio.run(retriever.abatch(questions))
    assert [[d.id for d in docs] for docs in got] == want


@pytest.mark.parametrize("k", [POOL - 10, POOL + 10])
def test_refuses_another_k(lc_store, embeddings, calibration, squad_questions, k):
    retriever = _compression(
        lc_store.as_retriever(search_kwargs={"k": k}),
        ConformalDocumentCompressor(calibration=calibration, embeddings=embeddings),
    )
    with pytest.raises(ConformalError, match=f"'k': {POOL}"):
        retriever.invoke(squad_questions[0].question)
    with pytest.raises(ConformalError, match=r"k=60|pool_size"):
        calibrate_compressor(lc_store.as_retriever(search_kwargs={"k": 60}), [], embeddings=embeddings, pool_size=POOL)


def test_refuses_other_embeddings_and_missing_scores(calibration):
    with pytest.raises(FingerprintMismatchError, match="embedding"):
        ConformalDocumentCompressor(calibration=calibration, embeddings=DeterministicFakeEmbedding(size=384))
    with pytest.raises(FingerprintMismatchError, match=r"embeddings=\.\.\."):
        ConformalDocumentCompressor(calibration=calibration)
    unchecked = ConformalDocumentCompressor(calibration=calibration, options=ServingOptions(check_fingerprint=False))
    docs = [Document(page_content=str(i)) for i in range(POOL)]
    with pytest.raises(ConformalError, match="metadata\\['score'\\]"):
        unchecked.compress_documents(docs, "q")


def test_drift_monitor_is_updated_by_every_query(base, embeddings, calibration, squad_questions, dropin_split):
    from conformal_rag_plugins.monitor.monitor import ConformalMonitor

    reference = [
        score_documents(squad_questions[i].question, base.invoke(squad_questions[i].question), embeddings)
        for i in dropin_split.calibration[:60]
    ]
    monitor = ConformalMonitor.from_observations(calibration, reference)
    options = ServingOptions(monitor=monitor)
    compressor = ConformalDocumentCompressor(calibration=calibration, embeddings=embeddings, options=options)
    retriever = _compression(base, compressor)
    questions = [squad_questions[i].question for i in dropin_split.held_out[:3]]
    for q in questions:
        retriever.invoke(q)
    asyncio.run(retriever.ainvoke(questions[0]))
    assert monitor.n_stream == 4
    top1 = float(np.max(score_documents(questions[0], base.invoke(questions[0]), embeddings)))
    assert monitor.stream[0] == pytest.approx(top1) and monitor.stream[3] == pytest.approx(top1)
