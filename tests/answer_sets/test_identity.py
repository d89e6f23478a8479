"""Issue 21 part 3: an answer-set calibration records its generator and refuses another one at query time.

Each adapter calibrates through its own ``calibrate_answer_sets`` on a small in-memory host with a
fake LLM, then queries through its own synthesizer: the same LLM works, another LLM, other sampling
settings, another prompt or another clustering embedding model is refused with an error naming the
field, its calibrated and its live value. Before the fix nothing was recorded and nothing compared.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/synthesizer.py
#   conformal_rag_plugins/llamaindex/synthesizer.py

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.engine import ChunkInput, abuild_answer_set
from conformal_rag_plugins.answer_sets.options import (
    ClusteringOptions,
    RetrievalStageOptions,
    SamplingOptions,
    SplitOptions,
)
from conformal_rag_plugins.core.errors import (
    CalibrationIntegrityError,
    FingerprintMismatchError,
    GeneratorMismatchError,
    InfiniteThresholdWarning,
    UncheckedGeneratorWarning,
)
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.runtime.run_sync import run_sync
from conformal_rag_plugins.storage.jsonio import with_checksum

N = 20  # flagged_rank needs 18 questions at alpha_retrieval = 0.1
M = 3
TEXTS = [f"Chunk {i} says the answer is text." for i in range(N)]
EXAMPLES = [CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=("text",), id=f"q{i}") for i in range(N)]
CONTEXT = [  # nodes/documents as a ConformalRetriever of the calibration writes them
    ("c1", "Rollo led the Norse.", {"conformal_nonconformity": 0.0}),
    ("c2", "Paris is in France.", {"conformal_nonconformity": 0.1}),
]


def _quiet(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


def _options(kw: dict[str, Any], pool_size: int | None = None) -> dict[str, Any]:
    """The option objects of ``calibrate_answer_sets``; ``kw`` may name ``embed`` and a ``clustering`` dict."""
    clustering = kw.pop("clustering", None) or {"method": "rougeL", "tau": 0.7}
    return {
        "sampling": SamplingOptions(n_samples=M, progress=False),
        "split": SplitOptions(alpha_retrieval=0.1),
        "clustering": ClusteringOptions(clustering["method"], clustering.get("tau"), embedder=kw.pop("embed", None)),
        "retrieval": RetrievalStageOptions(pool_size=pool_size),
    }


class LlamaIndexWorld:
    """A ``VectorStoreIndex`` of the chunks, ``MockLLM`` samples and the LlamaIndex synthesizer."""

    def __init__(self) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.schema import TextNode

        nodes = [TextNode(id_=f"g{i}", text=t) for i, t in enumerate(TEXTS)]
        self.retriever = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)).as_retriever(
            similarity_top_k=5
        )

    @staticmethod
    def llm(max_tokens: int = 2, other_class: bool = False) -> Any:
        from llama_index.core.llms import MockLLM

        class OtherMock(MockLLM):
            pass

        return (OtherMock if other_class else MockLLM)(max_tokens=max_tokens)

    @staticmethod
    def embedder(dim: int = 8) -> Any:
        from llama_index.core.embeddings import MockEmbedding

        return MockEmbedding(embed_dim=dim)

    def calibrate(self, llm: Any, **kw: Any) -> AnswerSetCalibration:
        from conformal_rag_plugins.llamaindex import calibrate_answer_sets

        return _quiet(
            calibrate_answer_sets,
            self.retriever,
            llm,
            EXAMPLES,
            confidence_level=0.4,
            **_options(kw),
        )

    @staticmethod
    def query(cal: AnswerSetCalibration, llm: Any, embed: Any = None, prompt: str | None = None) -> dict[str, Any]:
        from llama_index.core.prompts import PromptTemplate
        from llama_index.core.schema import NodeWithScore, TextNode

        from conformal_rag_plugins.llamaindex import ConformalAnswerSetSynthesizer

        synth = ConformalAnswerSetSynthesizer(llm=llm, calibration=cal, embed_model=embed)
        if prompt is not None:
            synth.update_prompts({"completion_prompt": PromptTemplate(prompt)})
        nodes = [NodeWithScore(node=TextNode(id_=i, text=t, metadata=m), score=1.0) for i, t, m in CONTEXT]
        return dict(synth.synthesize("Who led the Norse?", nodes).metadata)


class LangChainWorld:
    """An in-memory vector store with relevance scores, a fake completion LLM and the LangChain synthesizer."""

    def __init__(self) -> None:
        from langchain_core.documents import Document
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.vectorstores import InMemoryVectorStore

        class ScoredStore(InMemoryVectorStore):
            def _select_relevance_score_fn(self) -> Any:
                return lambda cosine: (1.0 + cosine) / 2.0

        self.store = ScoredStore(DeterministicFakeEmbedding(size=8))
        self.store.add_documents([Document(id=f"g{i}", page_content=t) for i, t in enumerate(TEXTS)])

    @staticmethod
    def llm(max_tokens: int = 2, other_class: bool = False) -> Any:
        from langchain_core.language_models import FakeListLLM

        class SettingsLLM(FakeListLLM):
            max_tokens: int = 2

        class OtherLLM(SettingsLLM):
            pass

        return (OtherLLM if other_class else SettingsLLM)(responses=["text"], max_tokens=max_tokens)

    @staticmethod
    def embedder(dim: int = 8) -> Any:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        return DeterministicFakeEmbedding(size=dim)

    def calibrate(self, llm: Any, **kw: Any) -> AnswerSetCalibration:
        from conformal_rag_plugins.langchain import calibrate_answer_sets

        return _quiet(
            calibrate_answer_sets,
            self.store,
            llm,
            EXAMPLES,
            confidence_level=0.4,
            **_options(kw, pool_size=5),
        )

    @staticmethod
    def query(cal: AnswerSetCalibration, llm: Any, embed: Any = None, prompt: str | None = None) -> dict[str, Any]:
        from langchain_core.documents import Document
        from langchain_core.prompts import PromptTemplate

        from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer

        synth = ConformalAnswerSetSynthesizer(llm=llm, calibration=cal, embeddings=embed)
        if prompt is not None:
            synth.sampler.completion_prompt = PromptTemplate.from_template(prompt)
        docs = [Document(id=i, page_content=t, metadata=m) for i, t, m in CONTEXT]
        return synth.invoke({"question": "Who led the Norse?", "context": docs}).to_dict()


@pytest.fixture(params=["llamaindex", "langchain"], scope="module")
def world(request: pytest.FixtureRequest) -> LlamaIndexWorld | LangChainWorld:
    return LlamaIndexWorld() if request.param == "llamaindex" else LangChainWorld()


@pytest.fixture(scope="module")
def calibrated(world: LlamaIndexWorld | LangChainWorld) -> AnswerSetCalibration:
    return world.calibrate(world.llm())


def _refused(world: Any, cal: AnswerSetCalibration, field: str, calibrated_value: Any, live_value: Any, **q: Any):
    with pytest.raises(GeneratorMismatchError) as info:
        world.query(cal, q.pop("llm", None) or world.llm(), **q)
    message = str(info.value)
    assert field in info.value.fields, message
    line = next(ln for ln in message.splitlines() if f"{field}:" in ln)
    assert repr(calibrated_value) in line.split("used with")[0] and repr(live_value) in line.split("used with")[1]
    assert isinstance(info.value, FingerprintMismatchError)  # caught like a retrieval calibration's mismatch
    return info.value


def test_calibration_records_the_generator(world, calibrated: AnswerSetCalibration) -> None:
    gen = calibrated.generator_
    assert gen is not None
    assert gen["llm"]["class"] in ("MockLLM", "SettingsLLM")
    assert gen["sampling"]["max_tokens"] == 2 and gen["sampling"]["n_samples"] == M
    assert gen["sampling"]["prompt"] == "completion" and len(gen["sampling"]["prompt_sha256"]) == 64
    assert gen["embedding"] is None  # ROUGE clustering uses no embedder


def test_the_calibrated_generator_is_accepted(world, calibrated: AnswerSetCalibration) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedGeneratorWarning)
        meta = world.query(calibrated, world.llm())
    assert meta["extra"]["generator_checked"] is True
    assert meta["retrieval_set"]


def test_another_llm_is_refused_naming_the_field(world, calibrated: AnswerSetCalibration) -> None:
    name = calibrated.generator_["llm"]["class"]
    other = "OtherMock" if name == "MockLLM" else "OtherLLM"
    _refused(world, calibrated, "llm.class", name, other, llm=world.llm(other_class=True))


def test_other_sampling_settings_are_refused_naming_the_field(world, calibrated: AnswerSetCalibration) -> None:
    _refused(world, calibrated, "sampling.max_tokens", 2, 5, llm=world.llm(max_tokens=5))


def test_another_prompt_is_refused_naming_the_field(world, calibrated: AnswerSetCalibration) -> None:
    with pytest.raises(GeneratorMismatchError) as info:
        world.query(calibrated, world.llm(), prompt="C: {context}\nQ: {question}\nA:")
    assert info.value.fields == ("sampling.prompt_sha256",)
    assert calibrated.generator_["sampling"]["prompt_sha256"] in str(info.value)


def test_another_embedding_model_is_refused_naming_the_field(world) -> None:
    cal = world.calibrate(world.llm(), embed=world.embedder(8), clustering={"method": "embedding", "tau": 0.9})
    assert cal.generator_["embedding"]["dim"] == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedGeneratorWarning)
        assert world.query(cal, world.llm(), embed=world.embedder(8))["extra"]["generator_checked"] is True
    _refused(world, cal, "embedding.dim", 8, 16, embed=world.embedder(16))


def test_a_saved_record_round_trips_and_is_checked(world, calibrated: AnswerSetCalibration, tmp_path) -> None:
    path = calibrated.save(tmp_path / "cal.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedGeneratorWarning)
        loaded = AnswerSetCalibration.load(path)
    assert loaded == calibrated and loaded.generator_ == calibrated.generator_
    _refused(world, loaded, "sampling.max_tokens", 2, 3, llm=world.llm(max_tokens=3))
    # a record that disagrees with the file is refused like any other bad field
    data = json.loads(path.read_text())
    data["generator"]["sampling"]["n_samples"] = M + 1
    path.write_text(json.dumps(with_checksum({k: v for k, v in data.items() if k != "checksum"})))
    with pytest.raises(CalibrationIntegrityError, match=r"generator\.sampling\.n_samples"):
        AnswerSetCalibration.load(path)


def test_an_old_file_without_a_record_loads_with_a_warning_and_queries_unchecked(
    world, calibrated: AnswerSetCalibration, tmp_path
) -> None:
    data = calibrated.to_dict()
    old = with_checksum({k: v for k, v in data.items() if k not in ("generator", "checksum")})  # as version 1 wrote
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    with pytest.warns(UncheckedGeneratorWarning, match="cannot check"):
        loaded = AnswerSetCalibration.load(path)
    assert loaded.generator_ is None
    with pytest.warns(UncheckedGeneratorWarning, match="cannot be compared"):
        meta = world.query(loaded, world.llm(max_tokens=5))  # another setting: not detectable, but said so
    assert meta["extra"]["generator_checked"] is False
    # issue 33 item 4: an unchecked generator is not guaranteed, and the reason names the missing record
    assert meta["guaranteed"] is False
    assert "no generator record" in meta["reason"]


def test_the_engine_compares_and_says_when_it_cannot(calibrated: AnswerSetCalibration) -> None:
    from conformal_rag_plugins.answer_sets.sample_record import Sample

    async def sample(question: str, context: str) -> list[Sample]:
        return [Sample("Rollo")] * M

    chunks = [ChunkInput("c1", "Rollo led the Norse.", 0.0)]
    same = run_sync(abuild_answer_set(calibrated, "Who?", chunks, sample, generator=calibrated.generator_))
    assert same.extra["generator_checked"] is True
    hotter = json.loads(json.dumps(calibrated.generator_))
    hotter["sampling"]["temperature"] = 1.5
    with pytest.raises(GeneratorMismatchError, match=r"sampling\.temperature: calibrated with nothing, used with 1\.5"):
        run_sync(abuild_answer_set(calibrated, "Who?", chunks, sample, generator=hotter))
    with pytest.warns(UncheckedGeneratorWarning, match="did not describe"):
        blind = run_sync(abuild_answer_set(calibrated, "Who?", chunks, sample))
    assert blind.extra["generator_checked"] is False


def test_an_unchecked_generator_is_not_guaranteed_and_says_why() -> None:
    """Issue 33 item 4: the same samples are guaranteed only when the generator was checked."""
    from dataclasses import replace

    from conformal_rag_plugins.answer_sets.identity import generator_record

    from .test_engine_guarantee_holes import World, _toy

    record = generator_record({"llm": {"class": "Fake", "name": "toy"}, "sampling": {"temperature": 1.0}})
    cal = replace(_toy(), generator_=record)
    chunks, sample = [ChunkInput("g1", "gold 1", 0.0)], World(2).sample
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedGeneratorWarning)
        checked = run_sync(abuild_answer_set(cal, "question 1?", chunks, sample, generator=record))
    assert checked.guaranteed is True, checked.reason  # the baseline: this set keeps the promise
    assert checked.extra["generator_checked"] is True and "generator was not checked" not in checked.reason
    with pytest.warns(UncheckedGeneratorWarning, match="not guaranteed"):
        live_missing = run_sync(abuild_answer_set(cal, "question 1?", chunks, sample))
    assert live_missing.guaranteed is False and live_missing.extra["generator_checked"] is False
    assert "no generator record of the LLM in use" in live_missing.reason
    old = replace(cal, generator_=None)  # as a file saved before the record existed loads
    with pytest.warns(UncheckedGeneratorWarning):
        cal_missing = run_sync(abuild_answer_set(old, "question 1?", chunks, sample, generator=record))
    assert cal_missing.guaranteed is False
    assert "the calibration has no generator record" in cal_missing.reason
    assert cal_missing.answers == checked.answers  # the same set: only the flag tells the truth now
    partial = replace(cal, generator_={**record, "sampling": None})  # a record without its sampling section
    with pytest.warns(UncheckedGeneratorWarning):
        part = run_sync(abuild_answer_set(partial, "question 1?", chunks, sample, generator=record))
    assert part.guaranteed is False and "sampling record is missing" in part.reason


# Issue 33 item 6: the record kept a client's headers and keys. Planted secrets must never reach the file.
SECRETS = ("sk-PLANTED-KEY", "PLANTED-BEARER", "PLANTED-DEFAULT-HEADER", "PLANTED-BODY-AUTH", "PLANTED-KWARGS-AUTH")


def _secret_llamaindex_llm(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real ``OpenAILike`` client with secrets in every place a client holds them; calls answer locally."""
    from llama_index.core.llms import CompletionResponse
    from llama_index.llms.openai_like import OpenAILike

    async def acomplete(self: Any, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="text")

    monkeypatch.setattr(OpenAILike, "acomplete", acomplete)  # constructing it calls nothing; this stops the calls
    return OpenAILike(
        model="planted-model",
        api_base="http://127.0.0.1:9/v1",
        api_key=SECRETS[0],
        temperature=0.7,
        max_tokens=2,
        default_headers={"Authorization": f"Bearer {SECRETS[2]}"},
        additional_kwargs={
            "extra_headers": {"Authorization": f"Bearer {SECRETS[1]}"},
            "extra_body": {"Authorization": SECRETS[3], "top_k": 40},
            "model_kwargs": {"Authorization": SECRETS[4]},
            "api_key": SECRETS[0],
            "top_p": 0.9,
        },
    )


def _secret_langchain_llm(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real ``ChatOpenAI`` client with secrets in every place a client holds them; calls answer locally."""
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_openai import ChatOpenAI

    async def agenerate(self: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="text"))])

    monkeypatch.setattr(ChatOpenAI, "_agenerate", agenerate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "extra_headers should be specified explicitly"
        return ChatOpenAI(
            model="planted-model",
            base_url="http://127.0.0.1:9/v1",
            api_key=SECRETS[0],
            temperature=0.7,
            max_tokens=2,
            max_retries=0,
            default_headers={"Authorization": f"Bearer {SECRETS[2]}"},
            extra_body={"Authorization": SECRETS[3], "top_k": 40},
            model_kwargs={"extra_headers": {"Authorization": f"Bearer {SECRETS[1]}"}, "Authorization": SECRETS[4]},
        )


def test_no_header_key_or_token_reaches_the_saved_record(world, monkeypatch, tmp_path) -> None:
    is_llamaindex = isinstance(world, LlamaIndexWorld)
    llm = (_secret_llamaindex_llm if is_llamaindex else _secret_langchain_llm)(monkeypatch)
    cal = world.calibrate(llm)
    text = cal.save(tmp_path / "cal.json").read_text()
    assert not [s for s in SECRETS if s in text], text
    assert "Authorization" not in text and "headers" not in text and "api_key" not in text
    # what identifies the generator is still recorded, and matches itself after a reload
    sampling = cal.generator_["sampling"]
    assert sampling["temperature"] == 0.7
    nested = sampling["additional_kwargs"] if is_llamaindex else sampling
    assert nested["extra_body"] == {"top_k": 40}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedGeneratorWarning)
        meta = world.query(AnswerSetCalibration.load(tmp_path / "cal.json"), llm)
    assert meta["extra"]["generator_checked"] is True


def test_a_record_saved_with_secrets_by_an_older_version_still_matches(calibrated: AnswerSetCalibration) -> None:
    """Records written before the allow-list may hold keys it drops; they still match the same generator."""
    from conformal_rag_plugins.answer_sets.identity import check_generator

    old = json.loads(json.dumps(calibrated.generator_))
    old["sampling"]["extra_headers"] = {"Authorization": "Bearer x"}
    old["sampling"]["additional_kwargs"] = {"api_key": "sk-x"}
    old["llm"]["api_base"] = "http://127.0.0.1:9/v1"
    assert check_generator(old, calibrated.generator_, calibrated.clustering_) == ""  # checked: no reason
