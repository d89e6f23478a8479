"""Answer sets end to end with the real local LLM (Gemma 3 270M via llama-cpp) on a handful of questions."""

from __future__ import annotations

import math

import pytest

from conformal_rag_plugins.calibration.answer_sets import AnswerSetCalibration
from conformal_rag_plugins.generation import SampleCache

pytestmark = pytest.mark.integration

N_CAL = 10
M = 3


def _check_calibration(cal: AnswerSetCalibration) -> None:
    assert len(cal.generation_scores_) == N_CAL
    assert all(math.isinf(s) or -1.0 <= s < 0 for s in cal.generation_scores_)
    assert 0.0 <= cal.coverage_ceiling_ <= 1.0
    assert cal.n_samples_ == M and "gguf" in cal.model_
    assert math.isclose(cal.alpha_retrieval_ + cal.alpha_generation_, cal.alpha_)


def test_llamaindex_local_llm_answer_sets(host_factory, squad_questions, tmp_path) -> None:
    from llama_index.core.query_engine import RetrieverQueryEngine

    from conformal_rag_plugins.llamaindex import (
        ConformalAnswerSetSynthesizer,
        ConformalRetriever,
        calibrate_answer_sets,
    )
    from conformal_rag_plugins.llamaindex.llm import local_llm

    host = host_factory("llamaindex", "hybrid").host
    llm = local_llm(temperature=1.0, max_new_tokens=12)
    cache = SampleCache(tmp_path / "samples.sqlite")
    cal = calibrate_answer_sets(
        host,
        llm,
        squad_questions[:N_CAL],
        confidence_level=0.4,
        alpha_retrieval=0.1,
        n_samples=M,
        cache=cache,
        max_concurrency=1,
        progress=False,
    )
    _check_calibration(cal)
    engine = RetrieverQueryEngine(
        retriever=ConformalRetriever(retriever=host, calibration=cal),
        response_synthesizer=ConformalAnswerSetSynthesizer(llm=llm, calibration=cal, cache=cache, max_concurrency=1),
    )
    question = squad_questions[20]
    response = engine.query(question.question)
    meta = response.metadata
    assert meta["llm_calls"] == M * len(meta["retrieval_set"])
    assert meta["retrieval_set"], "the relative family always keeps the top chunk"
    assert isinstance(meta["answer_set"], list) and meta["alpha"] == pytest.approx(0.6)
    if not meta["abstained"]:
        assert response.response == next(a["text"] for a in meta["answer_set"] if not a["abstention"])
    for answer in meta["answer_set"]:
        assert set(answer["chunk_ids"]) <= set(meta["retrieval_set"])


def test_langchain_local_llm_answer_sets(host_factory, squad_questions, tmp_path) -> None:
    from langchain_core.runnables import RunnablePassthrough

    from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer, ConformalRetriever, calibrate_answer_sets
    from conformal_rag_plugins.langchain.llm import local_llm

    host = host_factory("langchain", "hybrid").host
    llm = local_llm(temperature=1.0, max_tokens=12)
    cache = SampleCache(tmp_path / "samples.sqlite")
    cal = calibrate_answer_sets(
        host,
        llm,
        squad_questions[:N_CAL],
        confidence_level=0.4,
        alpha_retrieval=0.1,
        n_samples=M,
        cache=cache,
        max_concurrency=1,
        progress=False,
    )
    _check_calibration(cal)
    chain = {
        "context": ConformalRetriever(retriever=host, calibration=cal),
        "question": RunnablePassthrough(),
    } | ConformalAnswerSetSynthesizer(llm=llm, calibration=cal, cache=cache, max_concurrency=1)
    result = chain.invoke(squad_questions[20].question)
    assert result.llm_calls == M * len(result.retrieval_set) and result.retrieval_set
    assert result.abstained or result.response in {a["text"] for a in result.answers}
