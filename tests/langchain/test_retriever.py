"""LangChain drop-in: ``calibrate_retriever`` + ``ConformalRetriever`` through the public API on the real stack."""

from __future__ import annotations

import asyncio
import math
import warnings

import numpy as np
import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from conformal_rag_plugins.core.errors import GuaranteeCutWarning
from conformal_rag_plugins.core.quantile import conformal_quantile, conformal_rank
from conformal_rag_plugins.langchain import ConformalRetriever, fingerprint_of
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.serving import ServingOptions

pytestmark = pytest.mark.integration

ALPHA = 0.1
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


def _ids(docs) -> list[str]:
    return [d.id for d in docs]


def _check_docs(docs, cal) -> None:
    assert docs, "the conformal set is never empty for the relative family (the top chunk has r = 0)"
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    for d in docs:
        assert set(CONFORMAL_KEYS) <= set(d.metadata)
        assert d.id and d.page_content
        assert d.metadata["conformal_threshold"] == cal.threshold_
        assert d.metadata["conformal_alpha"] == pytest.approx(ALPHA)
        assert d.metadata["conformal_score_family"] == "relative"
        assert d.metadata["conformal_guaranteed"] is True
        assert d.metadata["conformal_set_size"] == len(docs)
        assert d.metadata["conformal_nonconformity"] == pytest.approx(scores[0] - d.metadata["score"])
        assert d.metadata["conformal_nonconformity"] <= cal.threshold_ + 1e-12
        assert {"dense_score", "bm25_score"} <= set(d.metadata)  # the host's own metadata survives


def test_calibration_through_api_matches_core(lc_hybrid_calibration, observations, dropin_split):
    cal = lc_hybrid_calibration
    assert cal.n_calibration_ == 300
    assert (cal.alpha_, cal.method_, cal.score_family_, cal.pool_size_) == (
        pytest.approx(ALPHA),
        "split",
        "relative",
        50,
    )
    fp = cal.fingerprint_
    assert (fp.framework, fp.store, fp.distance, fp.embedding_dim) == (
        "langchain",
        "ScoredFusionRetriever[Chroma+BM25]",
        "cosine",
        384,
    )
    scores = [observations[i].score("relative") for i in dropin_split.calibration]
    assert cal.threshold_ == conformal_quantile(scores, ALPHA)
    assert cal.n_misses_ == sum(1 for s in scores if math.isinf(s))
    assert 0 < cal.threshold_ < math.inf


def test_direct_invoke_and_ainvoke(retriever, lc_hybrid_calibration, squad_questions, dropin_split):
    for i in dropin_split.held_out[:5]:
        question = squad_questions[i].question
        docs = retriever.invoke(question)
        _check_docs(docs, lc_hybrid_calibration)
        adocs = asyncio.run(retriever.ainvoke(question))
        assert _ids(adocs) == _ids(docs)
        assert [d.metadata["score"] for d in adocs] == [d.metadata["score"] for d in docs]
    batch = retriever.batch([squad_questions[i].question for i in dropin_split.held_out[:3]])
    assert [_ids(b) for b in batch] == [
        _ids(retriever.invoke(squad_questions[i].question)) for i in dropin_split.held_out[:3]
    ]


def test_held_out_coverage(retriever, lc_hybrid_calibration, observations, squad_questions, dropin_split):
    """Every held-out set equals the core's set on the same pool, and coverage is about 1 - alpha."""
    cal = lc_hybrid_calibration
    covered, sizes = [], []
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        ids = _ids(retriever.invoke(ex.question))
        hit = any(g in ids for g in ex.gold_ids)
        assert (hit, len(ids)) == observations[i].covered_and_size(cal.score_family_, cal.threshold_), ex.question
        covered.append(hit)
        sizes.append(len(ids))
    n_cal, n_test = cal.n_calibration_, len(covered)
    k = conformal_rank(n_cal, ALPHA)
    sd = math.sqrt(k * (n_cal + 1 - k) * (n_cal + 1 + n_test) / (n_test * (n_cal + 1) ** 2 * (n_cal + 2)))
    coverage = float(np.mean(covered))
    assert coverage >= 1 - ALPHA - 3 * sd, (coverage, sd)
    assert coverage < 1.0
    assert 1.0 <= float(np.mean(sizes)) <= 3.0, np.mean(sizes)


def _covered_question(retriever, squad_questions, dropin_split, min_size: int = 1):
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        docs = retriever.invoke(ex.question)
        if len(docs) >= min_size and any(g in _ids(docs) for g in ex.gold_ids):
            return ex, docs
    raise AssertionError(f"no held-out question has a covered set of size >= {min_size}")


def test_inside_lcel_chain(retriever, squad_questions, dropin_split):
    ex, docs = _covered_question(retriever, squad_questions, dropin_split)
    seen: list[list] = []

    def format_docs(found) -> str:
        seen.append(found)
        return "\n\n".join(d.page_content for d in found)

    prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["France"])
    context = retriever | RunnableLambda(format_docs)
    chain = {"context": context, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    assert chain.invoke(ex.question) == "France"
    assert _ids(seen[-1]) == _ids(docs)
    # the prompt the model receives carries the gold passage and none of the conformal metadata
    messages = ({"context": context, "question": RunnablePassthrough()} | prompt).invoke(ex.question).to_messages()
    gold = next(d for d in docs if d.id in ex.gold_ids)
    assert gold.page_content in messages[0].content
    assert "conformal" not in messages[0].content
    # and the documented short form retriever | format_docs | prompt | llm runs too, also async
    short = retriever | RunnableLambda(format_docs) | ChatPromptTemplate.from_template("{context}") | llm
    assert short.invoke(ex.question).content == "France"
    assert asyncio.run(chain.ainvoke(ex.question)) == "France"
    assert _ids(seen[-1]) == _ids(docs)


def test_save_load_round_trip(tmp_path, host, lc_hybrid_calibration, retriever, squad_questions, dropin_split):
    path = lc_hybrid_calibration.save(tmp_path / "calibration.json")
    loaded = RetrievalCalibration.load(path, expected=fingerprint_of(host))
    assert loaded == lc_hybrid_calibration
    reloaded = ConformalRetriever(retriever=host, calibration=loaded)
    for i in dropin_split.held_out[:10]:
        question = squad_questions[i].question
        a, b = retriever.invoke(question), reloaded.invoke(question)
        assert _ids(a) == _ids(b)
        assert [d.metadata for d in a] == [d.metadata for d in b]


def test_max_k_and_k_cut_warn_min_k_pads(host, lc_hybrid_calibration, retriever, squad_questions, dropin_split):
    ex, full = _covered_question(retriever, squad_questions, dropin_split, min_size=2)
    capped = ConformalRetriever(retriever=host, calibration=lc_hybrid_calibration, options=ServingOptions(max_k=1))
    with pytest.warns(GuaranteeCutWarning, match="max_k=1"):
        docs = capped.invoke(ex.question)
    assert _ids(docs) == _ids(full)[:1]
    assert docs[0].metadata["conformal_guaranteed"] is False
    assert docs[0].metadata["conformal_set_size"] == len(full)
    # LangChain's usual k (constructor or invoke kwarg) is the same cap
    with pytest.warns(GuaranteeCutWarning):
        by_kwarg = retriever.invoke(ex.question, k=1)
    assert _ids(by_kwarg) == _ids(full)[:1] and by_kwarg[0].metadata["conformal_guaranteed"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error", GuaranteeCutWarning)
        assert _ids(retriever.invoke(ex.question, k=len(full))) == _ids(full)  # a cap that does not bite
        pad = ServingOptions(min_k=len(full) + 3)
        padded = ConformalRetriever(retriever=host, calibration=lc_hybrid_calibration, options=pad)
        more = padded.invoke(ex.question)
    assert len(more) == len(full) + 3 and _ids(more)[: len(full)] == _ids(full)
    assert all(d.metadata["conformal_guaranteed"] for d in more)


def test_vectorstore_calibration(lc_store, lc_store_calibration, observations_factory, squad_questions, dropin_split):
    cal = lc_store_calibration
    assert (cal.fingerprint_.store, cal.fingerprint_.score_scale, cal.fingerprint_.retriever) == (
        "Chroma",
        "1-distance",
        "dense",
    )
    dense = observations_factory("langchain", "dense")
    assert cal.threshold_ == conformal_quantile(
        [dense[i].score("relative") for i in dropin_split.calibration[:150]], ALPHA
    )
    retriever = ConformalRetriever(vectorstore=lc_store, calibration=cal)
    for i in dropin_split.held_out[:5]:
        docs = retriever.invoke(squad_questions[i].question)
        assert docs and all(d.metadata["conformal_threshold"] == cal.threshold_ for d in docs)
        assert len(docs) == dense[i].covered_and_size("relative", cal.threshold_)[1]
        assert _ids(asyncio.run(retriever.ainvoke(squad_questions[i].question))) == _ids(docs)
