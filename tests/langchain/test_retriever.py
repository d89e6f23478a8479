"""LangChain drop-in: ``calibrate_retriever`` + ``ConformalRetriever`` through the public API on the real stack."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from conformal_rag_plugins.core.errors import GuaranteeCutWarning
from conformal_rag_plugins.langchain import ConformalRetriever, fingerprint_of
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.serving import ServingOptions

from .. import dropin_checks as checks

pytestmark = pytest.mark.integration

VIEW = checks.LangChainDocs()
CONFORMAL_KEYS = (
    "score",
    "conformal_nonconformity",
    "conformal_threshold",
    "conformal_alpha",
    "conformal_score_family",
    "conformal_set_size",
    "conformal_guaranteed",
)


@pytest.fixture(scope="module")
def host(host_factory):
    return host_factory("langchain", "hybrid").host


@pytest.fixture(scope="module")
def retriever(host, lc_hybrid_calibration):
    return ConformalRetriever(retriever=host, calibration=lc_hybrid_calibration)


@pytest.fixture(scope="module")
def observations(observations_factory):
    return observations_factory("langchain", "hybrid")


def _check_docs(docs, cal) -> None:
    checks.check_conformal_set(VIEW, docs, cal)
    for d in docs:
        assert set(CONFORMAL_KEYS) <= set(d.metadata)
        assert d.id and d.page_content
        assert {"dense_score", "bm25_score"} <= set(d.metadata)  # the host's own metadata survives


def test_calibration_through_api_matches_core(lc_hybrid_calibration, observations, dropin_split):
    cal = lc_hybrid_calibration
    checks.check_calibration_matches_core(cal, observations, dropin_split)
    fp = cal.fingerprint_
    assert (fp.framework, fp.store, fp.distance, fp.embedding_dim) == (
        "langchain",
        "ScoredFusionRetriever[Chroma+BM25]",
        "cosine",
        384,
    )


def test_direct_invoke_and_ainvoke(retriever, lc_hybrid_calibration, squad_questions, dropin_split):
    questions = [squad_questions[i].question for i in dropin_split.held_out[:5]]
    checks.check_sync_and_async(VIEW, retriever, lc_hybrid_calibration, questions, _check_docs)
    batch = retriever.batch([squad_questions[i].question for i in dropin_split.held_out[:3]])
    assert [VIEW.ids(b) for b in batch] == [
        VIEW.ids(retriever.invoke(squad_questions[i].question)) for i in dropin_split.held_out[:3]
    ]


def test_held_out_coverage(retriever, lc_hybrid_calibration, observations, squad_questions, dropin_split):
    """Every held-out set equals the core's set on the same pool, and coverage is about 1 - alpha."""
    checks.check_held_out_coverage(VIEW, retriever, lc_hybrid_calibration, observations, squad_questions, dropin_split)


def test_inside_lcel_chain(retriever, squad_questions, dropin_split):
    ex, docs = checks.covered_question(VIEW, retriever, squad_questions, dropin_split)
    seen: list[list] = []

    def format_docs(found) -> str:
        seen.append(found)
        return "\n\n".join(d.page_content for d in found)

    prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["France"])
    context = retriever | RunnableLambda(format_docs)
    chain = {"context": context, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    assert chain.invoke(ex.question) == "France"
    assert VIEW.ids(seen[-1]) == VIEW.ids(docs)
    # the prompt the model receives carries the gold passage and none of the conformal metadata
    messages = ({"context": context, "question": RunnablePassthrough()} | prompt).invoke(ex.question).to_messages()
    gold = next(d for d in docs if d.id in ex.gold_ids)
    assert gold.page_content in messages[0].content
    assert "conformal" not in messages[0].content
    # and the documented short form retriever | format_docs | prompt | llm runs too, also async
    short = retriever | RunnableLambda(format_docs) | ChatPromptTemplate.from_template("{context}") | llm
    assert short.invoke(ex.question).content == "France"
    assert asyncio.run(chain.ainvoke(ex.question)) == "France"
    assert VIEW.ids(seen[-1]) == VIEW.ids(docs)


def test_save_load_round_trip(tmp_path, host, lc_hybrid_calibration, retriever, squad_questions, dropin_split):
    path = lc_hybrid_calibration.save(tmp_path / "calibration.json")
    loaded = RetrievalCalibration.load(path, expected=fingerprint_of(host))
    assert loaded == lc_hybrid_calibration
    reloaded = ConformalRetriever(retriever=host, calibration=loaded)
    checks.check_same_sets(VIEW, retriever, reloaded, [squad_questions[i].question for i in dropin_split.held_out[:10]])


def test_max_k_and_k_cut_warn_min_k_pads(host, lc_hybrid_calibration, retriever, squad_questions, dropin_split):
    ex, full = checks.covered_question(VIEW, retriever, squad_questions, dropin_split, min_size=2)
    capped = ConformalRetriever(retriever=host, calibration=lc_hybrid_calibration, options=ServingOptions(max_k=1))
    checks.check_max_k_cut(VIEW, capped, ex.question, full)
    # LangChain's usual k (constructor or invoke kwarg) is the same cap
    with pytest.warns(GuaranteeCutWarning):
        by_kwarg = retriever.invoke(ex.question, k=1)
    assert VIEW.ids(by_kwarg) == VIEW.ids(full)[:1] and by_kwarg[0].metadata["conformal_guaranteed"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error", GuaranteeCutWarning)
        assert VIEW.ids(retriever.invoke(ex.question, k=len(full))) == VIEW.ids(full)  # a cap that does not bite
        pad = ServingOptions(min_k=len(full) + 3)
        padded = ConformalRetriever(retriever=host, calibration=lc_hybrid_calibration, options=pad)
    checks.check_min_k_pads(VIEW, padded, ex.question, full)


def test_vectorstore_calibration(lc_store, lc_store_calibration, observations_factory, squad_questions, dropin_split):
    cal = lc_store_calibration
    assert (cal.fingerprint_.store, cal.fingerprint_.score_scale, cal.fingerprint_.retriever) == (
        "Chroma",
        "1-distance",
        "dense",
    )
    dense = observations_factory("langchain", "dense")
    retriever = ConformalRetriever(vectorstore=lc_store, calibration=cal)
    checks.check_vector_store_sets(VIEW, retriever, cal, dense, squad_questions, dropin_split)
