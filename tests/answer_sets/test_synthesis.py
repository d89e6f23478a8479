"""Control flow of both ConformalAnswerSetSynthesizers with fake LLMs (no scores are faked away)."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/synthesizer.py
#   conformal_rag_plugins/llamaindex/synthesizer.py

from __future__ import annotations

import asyncio
import math

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins import SamplingOptions
from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer as LCSynth
from conformal_rag_plugins.llamaindex import ConformalAnswerSetSynthesizer as LISynth


def _docs() -> list[Document]:
    return [
        Document(id="c1", page_content="Rollo led the Norse.", metadata={"score": 0.9, "conformal_nonconformity": 0.0}),
        Document(id="c2", page_content="Paris is in France.", metadata={"score": 0.8, "conformal_nonconformity": 0.1}),
        Document(id="c3", page_content="Far away.", metadata={"score": 0.1, "conformal_nonconformity": 0.8}),
    ]


def test_toy_calibration_is_finite(toy_calibration: AnswerSetCalibration) -> None:
    assert toy_calibration.rule().guaranteed  # both thresholds finite
    assert not toy_calibration.guaranteed_ and toy_calibration.generator_ is None  # no record: queries cannot check
    assert math.isclose(toy_calibration.alpha_retrieval_ + toy_calibration.alpha_generation_, 0.4)
    # ceil(51 * 0.8) = 41st smallest of the generator scores is -0.5 (20 x -1, 15 x -0.75, 10 x -0.5)
    assert toy_calibration.generation_threshold_ == -0.5


def test_langchain_synthesizer_keeps_confident_clusters(toy_calibration: AnswerSetCalibration) -> None:
    from dataclasses import replace

    from conformal_rag_plugins.answer_sets.identity import live_generator

    llm = FakeListChatModel(responses=["Rollo", "Rollo", "Rollo", "Paris"])
    described = LCSynth(llm=llm, calibration=toy_calibration).sampler.identity()
    # calibrated with this LLM: the generator is checked, so the set can be guaranteed
    calibrated = replace(toy_calibration, generator_=live_generator(described, toy_calibration.clustering_))
    synth = LCSynth(llm=llm, calibration=calibrated)
    result = synth.invoke({"question": "Who led the Norse?", "context": _docs()})
    assert result.extra["generator_checked"] is True
    # c3 is outside the retrieval threshold (q_ret < 0.8), so only c1 and c2 are sampled: 2 x 4 calls
    assert result.retrieval_set == ["c1", "c2"]
    assert result.llm_calls == 8
    assert result.response == "Rollo"
    texts = {a["text"]: a for a in result.answers}
    assert texts["Rollo"]["confidence"] == 0.75
    assert set(texts["Rollo"]["chunk_ids"]) <= {"c1", "c2"}
    # a 1-of-4 cluster has -confidence = -0.25 > q_gen = -0.5: it is not in the set
    assert all(a["confidence"] >= 0.5 for a in result.answers)
    assert not result.abstained and result.guaranteed


def test_langchain_synthesizer_in_lcel_and_async(toy_calibration: AnswerSetCalibration) -> None:
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    llm = FakeListChatModel(responses=["I don't know"])
    chain = {"context": RunnableLambda(lambda _q: _docs()), "question": RunnablePassthrough()} | LCSynth(
        llm=llm, calibration=toy_calibration
    )
    result = chain.invoke("Who?")
    assert result.abstained and result.response == "I don't know"
    assert asyncio.run(chain.ainvoke("Who?")).abstained


def test_langchain_empty_context_abstains(toy_calibration: AnswerSetCalibration) -> None:
    synth = LCSynth(llm=FakeListChatModel(responses=["x"]), calibration=toy_calibration)
    result = synth.invoke({"question": "Who?", "context": []})
    assert result.abstained and result.llm_calls == 0 and result.answers == []


def test_llamaindex_synthesizer_response_metadata(toy_calibration: AnswerSetCalibration) -> None:
    synth = LISynth(llm=MockLLM(max_tokens=2), calibration=toy_calibration)
    nodes = [
        NodeWithScore(node=TextNode(id_=d.id, text=d.page_content, metadata=d.metadata), score=d.metadata["score"])
        for d in _docs()
    ]
    response = synth.synthesize("Who led the Norse?", nodes)
    meta = response.metadata
    assert meta["retrieval_set"] == ["c1", "c2"]
    assert meta["answer_set"][0]["text"] == "text text"  # MockLLM echoes "text" tokens
    assert meta["answer_set"][0]["confidence"] == 1.0
    assert meta["alpha"] == 0.4 and meta["abstained"] is False
    assert response.response == "text text"
    assert len(response.source_nodes) == 3


def test_llamaindex_empty_retrieval_is_explicit_abstention(toy_calibration: AnswerSetCalibration) -> None:
    synth = LISynth(llm=MockLLM(max_tokens=2), calibration=toy_calibration)
    response = synth.synthesize("Who?", [])
    assert response.response == "I don't know"
    assert response.response != "Empty Response"
    assert response.metadata["abstained"] is True
    assert asyncio.run(synth.asynthesize("Who?", [])).metadata["abstained"] is True


def test_llamaindex_prompts_can_be_overridden(toy_calibration: AnswerSetCalibration) -> None:
    from llama_index.core.prompts import PromptTemplate

    synth = LISynth(llm=MockLLM(max_tokens=2), calibration=toy_calibration)
    assert set(synth.get_prompts()) == {"completion_prompt", "chat_prompt"}
    synth.update_prompts({"completion_prompt": PromptTemplate("C: {context}\nQ: {question}\nA:")})
    assert synth.sampler.completion_prompt.get_template().startswith("C: ")


def test_bad_inputs(toy_calibration: AnswerSetCalibration) -> None:
    m = toy_calibration.n_samples_
    with pytest.raises(CalibrationError, match=rf"n_samples=7 differs .* SamplingOptions\(n_samples={m}"):
        LISynth(llm=MockLLM(), calibration=toy_calibration, sampling=SamplingOptions(n_samples=7))
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        LISynth(llm=MockLLM(), calibration=toy_calibration, sampling=SamplingOptions(n_samples=0))
    for synth_cls, llm in ((LISynth, MockLLM()), (LCSynth, FakeListChatModel(responses=["x"]))):
        with pytest.raises(TypeError, match=r"pass sampling=SamplingOptions\(n_samples=4, max_concurrency=1\)"):
            synth_cls(llm=llm, calibration=toy_calibration, n_samples=4, max_concurrency=1)
        with pytest.raises(ConformalError, match=r"SamplingOptions\(cache=None\)"):
            synth_cls(llm=llm, calibration=toy_calibration, cache=None)
        synth = synth_cls(
            llm=llm, calibration=toy_calibration, sampling=SamplingOptions(n_samples=m, max_concurrency=1)
        )
        assert (synth.sampler.n_samples, synth.sampler.max_concurrency) == (m, 1)
        assert synth_cls(llm=llm, calibration=toy_calibration).sampler.n_samples == m
    with pytest.raises(CalibrationError, match="generator stage"):
        LISynth(llm=MockLLM(), calibration=toy_calibration.retrieval_)
    with pytest.raises(CalibrationError, match="generator stage"):
        LCSynth(llm=FakeListChatModel(responses=["x"]), calibration=toy_calibration.retrieval_)
    with pytest.raises(ConformalError, match="question"):
        LCSynth(llm=FakeListChatModel(responses=["x"]), calibration=toy_calibration).invoke({"context": []})
    with pytest.raises(CalibrationError, match="does not sum"):
        AnswerSetCalibration(toy_calibration.retrieval_, (-1.0,), 0.2, "bonferroni", 0.1, 0.05, 4, "m", {})


def test_failing_llm_becomes_abstention_and_cache_replays(toy_calibration: AnswerSetCalibration, tmp_path) -> None:
    class Boom(FakeListChatModel):
        async def ainvoke(self, *args, **kwargs):  # type: ignore[override]
            raise TimeoutError("provider down")

    m = toy_calibration.n_samples_
    synth = LCSynth(
        llm=Boom(responses=["x"]), calibration=toy_calibration, sampling=SamplingOptions(m, retries=1, timeout=1.0)
    )
    assert (synth.sampler.retries, synth.sampler.timeout) == (1, 1.0)
    synth.sampler.retries = 0
    result = synth.invoke({"question": "Who?", "context": _docs()[:1]})
    assert result.abstained and result.llm_calls == 4

    cache = SampleCache(tmp_path / "s.sqlite")
    sampling = SamplingOptions(n_samples=m, cache=cache)
    first = LCSynth(llm=FakeListChatModel(responses=["Rollo"]), calibration=toy_calibration, sampling=sampling)
    a = first.invoke({"question": "Who?", "context": _docs()[:1]})
    replay = LCSynth(llm=FakeListChatModel(responses=["Other"]), calibration=toy_calibration, sampling=sampling)
    b = replay.invoke({"question": "Who?", "context": _docs()[:1]})
    assert a.answers == b.answers and b.response == "Rollo"


def test_answer_set_calibration_json_roundtrip(toy_calibration: AnswerSetCalibration, tmp_path) -> None:
    path = toy_calibration.save(tmp_path / "as.json")
    assert AnswerSetCalibration.load(path) == toy_calibration
    text = path.read_text().replace('"alpha": 0.4', '"alpha": 0.2')
    path.write_text(text)
    from conformal_rag_plugins.core.errors import CalibrationIntegrityError

    with pytest.raises(CalibrationIntegrityError):
        AnswerSetCalibration.load(path)


def test_embedding_clustering_needs_and_uses_the_host_embeddings(toy_calibration: AnswerSetCalibration) -> None:
    from dataclasses import replace

    from langchain_core.embeddings import DeterministicFakeEmbedding

    cal = replace(toy_calibration, clustering_={"method": "embedding", "tau": 0.9})
    llm = FakeListChatModel(responses=["Rollo", "Rollo", "Rollo", "Paris"])
    with pytest.raises(CalibrationError, match="embedding"):
        LCSynth(llm=llm, calibration=cal).invoke({"question": "Who?", "context": _docs()[:1]})
    synth = LCSynth(llm=llm, calibration=cal, embeddings=DeterministicFakeEmbedding(size=16))
    result = synth.invoke({"question": "Who?", "context": _docs()[:1]})
    assert [(a["text"], a["confidence"]) for a in result.answers] == [("Rollo", 0.75)]
