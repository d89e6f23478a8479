"""Answer sets end to end with the real local LLM (Gemma 3 270M via llama-cpp) on a handful of questions."""

from __future__ import annotations

import math

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.options import SamplingOptions, SplitOptions
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache

pytestmark = pytest.mark.integration

N_CAL = 10
M = 3


def _check_calibration(cal: AnswerSetCalibration) -> None:
    assert len(cal.generation_scores_) == N_CAL
    assert all(math.isinf(s) or -1.0 <= s < 0 for s in cal.generation_scores_)
    assert 0.0 <= cal.coverage_ceiling_ <= 1.0
    assert cal.n_samples_ == M and "gguf" in cal.model_
    assert math.isclose(cal.alpha_retrieval_ + cal.alpha_generation_, cal.alpha_)
    # the generator record names the model file by digest, not by the cache path it was loaded from
    llm = cal.generator_["llm"]
    assert llm["name"] == "gemma-3-270m-q4_k_m.gguf" and len(llm["file_sha256"]) == 64 and llm["llama_cpp_python"]
    assert cal.generator_["sampling"]["n_samples"] == M and cal.generator_["sampling"]["prompt"] == "completion"


def test_llamaindex_local_llm_answer_sets(host_factory, squad_questions, tmp_path) -> None:
    from llama_index.core.query_engine import RetrieverQueryEngine

    from conformal_rag_plugins.llamaindex import (
        ConformalAnswerSetSynthesizer,
        ConformalRetriever,
        calibrate_answer_sets,
    )
    from conformal_rag_plugins.local.llamaindex_models import local_llm

    host = host_factory("llamaindex", "hybrid").host
    llm = local_llm(temperature=1.0, max_new_tokens=12)
    cache = SampleCache(tmp_path / "samples.sqlite")
    cal = calibrate_answer_sets(
        host,
        llm,
        squad_questions[:N_CAL],
        confidence_level=0.4,
        sampling=SamplingOptions(n_samples=M, cache=cache, max_concurrency=1, progress=False),
        split=SplitOptions(alpha_retrieval=0.2),  # 10 questions: a flagged rank at 0.2 needs 8 (0.1: 18)
    )
    _check_calibration(cal)
    engine = RetrieverQueryEngine(
        retriever=ConformalRetriever(retriever=host, calibration=cal),
        response_synthesizer=ConformalAnswerSetSynthesizer(
            llm=llm, calibration=cal, sampling=SamplingOptions(n_samples=M, cache=cache, max_concurrency=1)
        ),
    )
    question = squad_questions[20]
    response = engine.query(question.question)
    meta = response.metadata
    assert meta["llm_calls"] == M * len(meta["retrieval_set"])
    assert meta["extra"]["generator_checked"] is True  # the same LLM passes the comparison
    assert meta["retrieval_set"], "the relative family always keeps the top chunk"
    assert isinstance(meta["answer_set"], list) and meta["alpha"] == pytest.approx(0.6)
    if not meta["abstained"]:
        assert response.response == next(a["text"] for a in meta["answer_set"] if not a["abstention"])
    for answer in meta["answer_set"]:
        assert set(answer["chunk_ids"]) <= set(meta["retrieval_set"])


def test_langchain_local_llm_answer_sets(host_factory, squad_questions, tmp_path) -> None:
    from langchain_core.runnables import RunnablePassthrough

    from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer, ConformalRetriever, calibrate_answer_sets
    from conformal_rag_plugins.local.langchain_models import local_llm

    host = host_factory("langchain", "hybrid").host
    llm = local_llm(temperature=1.0, max_tokens=12)
    cache = SampleCache(tmp_path / "samples.sqlite")
    cal = calibrate_answer_sets(
        host,
        llm,
        squad_questions[:N_CAL],
        confidence_level=0.4,
        sampling=SamplingOptions(n_samples=M, cache=cache, max_concurrency=1, progress=False),
        split=SplitOptions(alpha_retrieval=0.2),  # 10 questions: a flagged rank at 0.2 needs 8 (0.1: 18)
    )
    _check_calibration(cal)
    chain = {
        "context": ConformalRetriever(retriever=host, calibration=cal),
        "question": RunnablePassthrough(),
    } | ConformalAnswerSetSynthesizer(
        llm=llm, calibration=cal, sampling=SamplingOptions(n_samples=M, cache=cache, max_concurrency=1)
    )
    result = chain.invoke(squad_questions[20].question)
    assert result.llm_calls == M * len(result.retrieval_set) and result.retrieval_set
    assert result.extra["generator_checked"] is True
    assert result.abstained or result.response in {a["text"] for a in result.answers}


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_local_llm_reports_logprobs_for_the_likelihood_score(framework: str) -> None:
    """``local_llm(logprobs=True)`` gives every sample Gemma's own mean token log-probability."""
    from conformal_rag_plugins.core.clustering import cluster_answers
    from conformal_rag_plugins.runtime.run_sync import run_sync

    context = "The Normans gave their name to Normandy, a region in France, in the 10th and 11th centuries."
    question = "In what country is Normandy located?"
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex.answer_sampler import LlamaIndexSampler as Sampler
        from conformal_rag_plugins.llamaindex.answer_sampler import model_id
        from conformal_rag_plugins.local.llamaindex_models import local_llm

        llm = local_llm(temperature=1.0, max_new_tokens=12, n_ctx=512, logprobs=True)
    else:
        from conformal_rag_plugins.langchain.answer_sampler import LangChainSampler as Sampler
        from conformal_rag_plugins.langchain.llm_calls import model_id
        from conformal_rag_plugins.local.langchain_models import local_llm

        llm = local_llm(temperature=1.0, max_tokens=12, logprobs=True)
    got = run_sync(Sampler(llm, n_samples=3, max_concurrency=1).asample(question, context))
    assert model_id(llm).endswith("+logprobs")
    real = [s for s in got if s.text]
    assert real, got
    assert all(s.logprob is not None and -20.0 < s.logprob <= 0.0 for s in real), got
    clusters = cluster_answers([s.text for s in got], logprobs=[s.logprob for s in got], score="likelihood")
    assert all(0.0 < c.confidence < 1.0 for c in clusters)


def test_one_slot_gives_the_same_samples_on_every_run_from_an_empty_cache(squad_questions, squad_entries, tmp_path):
    """Gemma's seed advances with every call, so its samples depend on the order of the calls.

    Sampling several chunks at once with ``max_concurrency=1`` must reach the model in the order the chunks
    came in, whatever the sample cache's threads do; then a new run from an empty cache gives the same
    samples. The control asks in the reverse order and must get other samples, so equal runs are no accident.
    """
    from conformal_rag_plugins.langchain.answer_sampler import LangChainSampler
    from conformal_rag_plugins.local.langchain_models import local_llm
    from conformal_rag_plugins.runtime.run_sync import run_sync

    texts = {e.id: e.text for e in squad_entries}
    pairs = [(ex.question, texts[ex.gold_ids[0]]) for ex in squad_questions[:4]]

    def run(name: str, order: list[int]) -> dict[int, list[str]]:
        sampler = LangChainSampler(
            local_llm(temperature=1.0, max_tokens=12), n_samples=2, max_concurrency=1,
            cache=SampleCache(tmp_path / f"{name}.sqlite"),
        )  # fmt: skip

        async def chunks():
            import asyncio

            return await asyncio.gather(*(sampler.asample(*pairs[i]) for i in order))

        return {i: [s.text for s in got] for i, got in zip(order, run_sync(chunks()), strict=True)}

    first, again = run("first", [0, 1, 2, 3]), run("again", [0, 1, 2, 3])
    assert first == again
    assert run("reversed", [3, 2, 1, 0]) != first  # negative control: the call order matters to the model
