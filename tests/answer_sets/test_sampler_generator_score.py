"""The likelihood tie-breaking generator score (issue 9 part 4): core, parsing, samplers, shipped path."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformal_rag_plugins.answer_sets.engine import ChunkInput, abuild_answer_set
from conformal_rag_plugins.answer_sets.options import with_generator_score
from conformal_rag_plugins.answer_sets.sample_record import Sample, mean_logprob
from conformal_rag_plugins.core.clustering import cluster_answers
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.runtime.run_sync import run_sync

from .test_engine_guarantee_holes import M, World, _calibrate

# ----------------------------------------------------------------------------- the score


@given(
    counts=st.lists(st.integers(1, 4), min_size=2, max_size=5),
    lps=st.lists(st.floats(-30.0, 0.0), min_size=5, max_size=5),
)
def test_likelihood_never_reorders_clusters_of_different_frequency(counts, lps) -> None:
    answers, logprobs = [], []
    for k, c in enumerate(counts):
        answers += [f"answer{k}"] * c
        logprobs += [lps[k]] * c
    m = len(answers)
    freq = {c.representative: c.count for c in cluster_answers(answers, method="exact")}
    tie = cluster_answers(answers, method="exact", logprobs=logprobs, score="likelihood")
    for a in tie:
        for b in tie:
            if freq[a.representative] > freq[b.representative]:
                assert a.confidence > b.confidence
        assert freq[a.representative] / (m + 1) <= a.confidence < (freq[a.representative] + 1) / (m + 1)
        assert 0.0 < a.confidence < 1.0


def test_likelihood_orders_clusters_of_equal_frequency() -> None:
    cl = cluster_answers(
        ["Lyon", "Paris", "Nice", "Paris"], method="exact", logprobs=[-2.0, -0.3, -0.1, -0.5], score="likelihood"
    )
    assert [c.representative for c in cl] == ["Paris", "Nice", "Lyon"]
    assert cl[0].likelihood == pytest.approx(math.exp(-0.4))
    # the frequency score ties Nice and Lyon; the likelihood score separates them
    freq = cluster_answers(["Lyon", "Paris", "Nice", "Paris"], method="exact")
    assert freq[1].confidence == freq[2].confidence
    assert cl[1].confidence > cl[2].confidence


def test_likelihood_needs_logprobs_of_every_answer_but_not_of_failed_samples() -> None:
    with pytest.raises(ConformalError, match="does not report logprobs"):
        cluster_answers(["Paris", "Lyon"], logprobs=[-0.1, None], score="likelihood")
    with pytest.raises(ConformalError, match="does not report logprobs"):
        cluster_answers(["Paris"], score="likelihood")
    cl = cluster_answers(["Paris", ""], method="exact", logprobs=[-0.1, None], score="likelihood")
    assert [c.abstention for c in cl] == [False, True]
    assert cl[1].likelihood is None and cl[1].confidence == pytest.approx(1 / 3)
    with pytest.raises(ConformalError, match="score must be one of"):
        cluster_answers(["Paris"], score="probability")
    with pytest.raises(ConformalError, match="<= 0"):
        cluster_answers(["Paris"], logprobs=[0.5], score="likelihood")
    with pytest.raises(ConformalError, match="2 answers"):
        cluster_answers(["Paris", "Lyon"], logprobs=[-0.1], score="likelihood")


# ----------------------------------------------------------------------------- reading logprobs


def test_mean_logprob_reads_every_provider_shape() -> None:
    llama_cpp = {"choices": [{"text": " 1889", "logprobs": {"tokens": [" 18", "89"], "token_logprobs": [-0.4, -0.2]}}]}
    assert mean_logprob(llama_cpp) == pytest.approx(-0.3)
    # the OpenAI SDK objects (attributes, not keys), chat shape
    chat = SimpleNamespace(
        choices=[SimpleNamespace(logprobs=SimpleNamespace(content=[SimpleNamespace(logprob=-1.0, token="a")]))]
    )
    assert mean_logprob(chat) == pytest.approx(-1.0)
    # LangChain: generation_info["logprobs"] (completions) and response_metadata["logprobs"] (chat)
    assert mean_logprob({"token_logprobs": [None, -0.5]}) == pytest.approx(-0.5)
    assert mean_logprob({"content": [{"token": "x", "logprob": -0.25}, {"token": "y", "logprob": -0.75}]}) == -0.5
    for nothing in (None, {}, {"choices": [{"text": "x", "logprobs": None}]}, {"token_logprobs": []}, "text"):
        assert mean_logprob(nothing) is None


def test_llamaindex_sampler_keeps_the_models_logprobs() -> None:
    from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_completion_callback

    from conformal_rag_plugins.llamaindex.answer_sampler import LlamaIndexSampler, model_id

    class WithLogprobs(CustomLLM):
        logprobs: bool = True

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="lp", is_chat_model=False)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            raw = {"choices": [{"text": " Paris", "logprobs": {"token_logprobs": [-0.2, -0.4]}}]}
            return CompletionResponse(text=" Paris", raw=raw)

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
            raise NotImplementedError

    got = run_sync(LlamaIndexSampler(WithLogprobs(), n_samples=2).asample("Where?", "In Paris."))
    assert [s.logprob for s in got] == [pytest.approx(-0.3)] * 2
    assert model_id(WithLogprobs()).endswith("+logprobs")


def test_langchain_sampler_keeps_the_models_logprobs() -> None:
    from langchain_core.language_models.llms import LLM
    from langchain_core.outputs import Generation, LLMResult

    from conformal_rag_plugins.langchain.answer_sampler import LangChainSampler

    class WithLogprobs(LLM):
        @property
        def _llm_type(self) -> str:
            return "with-logprobs"

        def _call(self, prompt: str, stop=None, run_manager=None, **kwargs: Any) -> str:
            raise AssertionError("the sampler must keep generation_info")

        def _generate(self, prompts, stop=None, run_manager=None, **kwargs: Any) -> LLMResult:
            info = {"logprobs": {"token_logprobs": [-1.0, -0.5]}}
            return LLMResult(generations=[[Generation(text=" Paris", generation_info=info)] for _ in prompts])

        async def _agenerate(self, prompts, stop=None, run_manager=None, **kwargs: Any) -> LLMResult:
            return self._generate(prompts, stop, None, **kwargs)

    got = run_sync(LangChainSampler(WithLogprobs(), n_samples=3).asample("Where?", "In Paris."))
    assert [s.text for s in got] == ["Paris"] * 3
    assert [s.logprob for s in got] == [pytest.approx(-0.75)] * 3


# ----------------------------------------------------------------------------- the shipped path


class LikelyWorld(World):
    """The gold chunk's answer is likely (-0.1), the noise unlikely (-3.0), abstentions in between."""

    def __init__(self, *args: Any, report: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.report = report

    async def sample(self, question: str, context: str) -> list[Sample]:
        got = await super().sample(question, context)
        if not self.report:
            return got
        return [Sample(s.text, logprob=-0.1 if s.text.startswith("ans") else -3.0) for s in got]


def test_calibration_records_the_generator_score_and_queries_use_it() -> None:
    world = LikelyWorld(40)
    freq = _calibrate(world)
    tie = _calibrate(world, generator_score="likelihood")
    assert freq.clustering_["score"] == "frequency" and tie.clustering_["score"] == "likelihood"
    # every generator score moves strictly inside its frequency band
    for f, t in zip(freq.generation_scores_, tie.generation_scores_, strict=True):
        assert math.isinf(f) == math.isinf(t)
        if math.isfinite(f):
            assert -f * M / (M + 1) < -t < (-f * M + 1) / (M + 1)
    chunks = [ChunkInput("g1", "gold 1", 0.0)]
    result = run_sync(abuild_answer_set(tie, "question 1?", chunks, world.sample))
    assert result.response == "ans1"
    assert all(a["confidence"] < 1 for a in result.answers)
    silent = LikelyWorld(40, report=False)
    with pytest.raises(ConformalError, match="does not report logprobs"):
        run_sync(abuild_answer_set(tie, "question 1?", chunks, silent.sample))
    with pytest.raises(ConformalError, match="does not report logprobs"):
        _calibrate(silent, generator_score="likelihood")


def test_saved_calibration_keeps_the_generator_score(tmp_path) -> None:
    from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration

    tie = _calibrate(LikelyWorld(40), generator_score="likelihood")
    tie.save(tmp_path / "cal.json")
    assert AnswerSetCalibration.load(tmp_path / "cal.json").clustering_["score"] == "likelihood"


def test_likelihood_breaks_the_frequency_tie_of_the_threshold() -> None:
    """Every gold answer is a single sample: the frequency threshold keeps every singleton, the tie-break does not."""

    class Singletons(LikelyWorld):
        async def sample(self, question: str, context: str) -> list[Sample]:
            i = int(question.split()[1].rstrip("?"))
            if context != f"gold {i}":
                return [Sample(t, logprob=-3.0) for t in ("x", "y", "z", "w")]
            return [
                Sample(f"ans{i}", logprob=-0.1 - 0.01 * (i % 5)),
                Sample("n1", logprob=-2.0),
                Sample("n2", logprob=-2.5),
                Sample("n3", logprob=-4.0),
            ]

    world = Singletons(60)
    kw = dict(confidence_level=0.5, alpha_retrieval=0.25)
    freq, tie = _calibrate(world, **kw), _calibrate(world, generator_score="likelihood", **kw)
    chunks = [ChunkInput("g1", "gold 1", 0.0)]
    sizes = {}
    for name, cal in (("frequency", freq), ("likelihood", tie)):
        result = run_sync(abuild_answer_set(cal, "question 1?", chunks, world.sample))
        assert "ans1" in [a["text"] for a in result.answers]
        sizes[name] = len(result.answers)
    assert sizes == {"frequency": 4, "likelihood": 1}


def test_response_prefers_the_likelier_of_equally_frequent_answers() -> None:
    world = LikelyWorld(40)
    cal = _calibrate(world)

    async def tie(question: str, context: str) -> list[Sample]:
        return [Sample("Lyon", logprob=-2.0), Sample("Paris", logprob=-0.2)] * 2

    result = run_sync(abuild_answer_set(cal, "question 1?", [ChunkInput("g1", "gold 1", 0.0)], tie))
    assert result.response == "Paris"


def test_unknown_generator_score_is_refused() -> None:
    with pytest.raises(CalibrationError, match="generator_score must be one of"):
        with_generator_score(None, "probability")
    assert with_generator_score({"method": "exact", "score": "likelihood"}, None)["score"] == "likelihood"
