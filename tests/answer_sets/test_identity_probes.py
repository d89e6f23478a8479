"""Issue 41 section 6, generator identity: settings that change the answers are part of the generator record.

A system prompt ("Always answer: Paris."), a logit bias and a response format change what the LLM
answers, so a calibration made without them must refuse a generator that has them (and the other
way round), in both frameworks. They are recorded as digests, so their text never reaches the file.
A record written by an older version that kept an API key or headers is scrubbed when loaded, so
loading and saving again never writes them. Before the fix each probe below was accepted or kept.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/answer_sets/calibration.py
#   conformal_rag_plugins/langchain/answer_sampler.py
#   conformal_rag_plugins/llamaindex/answer_sampler.py

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.core.errors import GeneratorMismatchError, UncheckedGeneratorWarning
from conformal_rag_plugins.storage.jsonio import with_checksum

from .test_identity import LangChainWorld, LlamaIndexWorld

PARIS = "Always answer: Paris."
BIAS = {"12366": 100}  # a token pushed up: another distribution of answers
FORMAT = {"type": "json_object"}


@pytest.fixture(params=["llamaindex", "langchain"], scope="module")
def world(request: pytest.FixtureRequest) -> LlamaIndexWorld | LangChainWorld:
    return LlamaIndexWorld() if request.param == "llamaindex" else LangChainWorld()


def _system_prompt_llm(world: Any, system_prompt: str | None) -> Any:
    """The world's fake LLM with a system prompt: LlamaIndex's ``LLM.system_prompt``; a LangChain model's field."""
    if isinstance(world, LlamaIndexWorld):
        from llama_index.core.llms import MockLLM

        return MockLLM(max_tokens=2, system_prompt=system_prompt)
    from langchain_core.language_models import FakeListLLM

    class SystemPromptLLM(FakeListLLM):
        max_tokens: int = 2
        system_prompt: str | None = None

    return SystemPromptLLM(responses=["text"], max_tokens=2, system_prompt=system_prompt)


def _openai_llm(world: Any, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> Any:
    """A real OpenAI-compatible client of the framework whose calls answer locally; ``settings`` are
    ``logit_bias`` / ``response_format`` as that framework takes them (call kwargs, or fields)."""
    if isinstance(world, LlamaIndexWorld):
        from llama_index.core.llms import CompletionResponse
        from llama_index.llms.openai_like import OpenAILike

        async def acomplete(self: Any, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return CompletionResponse(text="text")

        monkeypatch.setattr(OpenAILike, "acomplete", acomplete)
        return OpenAILike(
            model="m", api_base="http://127.0.0.1:9/v1", api_key="k", max_tokens=2, additional_kwargs=settings
        )
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_openai import ChatOpenAI

    async def agenerate(self: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="text"))])

    monkeypatch.setattr(ChatOpenAI, "_agenerate", agenerate)
    fields = {"logit_bias": settings["logit_bias"]} if "logit_bias" in settings else {}
    kwargs = {"response_format": settings["response_format"]} if "response_format" in settings else {}
    return ChatOpenAI(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        max_tokens=2,
        max_retries=0,
        model_kwargs=kwargs,
        **fields,
    )


def _checked(world: Any, cal: AnswerSetCalibration, llm: Any) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedGeneratorWarning)
        return bool(world.query(cal, llm)["extra"]["generator_checked"])


def test_a_system_prompt_is_recorded_as_a_digest_and_another_one_is_refused(world, tmp_path) -> None:
    cal = world.calibrate(_system_prompt_llm(world, None))
    assert _checked(world, cal, _system_prompt_llm(world, None))  # the control: the same generator passes
    with pytest.raises(GeneratorMismatchError) as info:
        world.query(cal, _system_prompt_llm(world, PARIS))
    assert info.value.fields == ("sampling.system_prompt",), str(info.value)
    assert PARIS not in str(info.value)  # named by its digest, never echoed
    paris = world.calibrate(_system_prompt_llm(world, PARIS))
    assert paris.generator_["sampling"]["system_prompt"].startswith("sha256:")
    text = paris.save(tmp_path / "cal.json").read_text()
    assert PARIS not in text
    assert _checked(world, AnswerSetCalibration.load(tmp_path / "cal.json"), _system_prompt_llm(world, PARIS))
    with pytest.raises(GeneratorMismatchError, match=r"sampling\.system_prompt"):
        world.query(paris, _system_prompt_llm(world, None))


@pytest.mark.parametrize(("setting", "value"), [("logit_bias", BIAS), ("response_format", FORMAT)])
def test_a_logit_bias_or_response_format_is_part_of_the_generator(world, monkeypatch, setting, value) -> None:
    cal = world.calibrate(_openai_llm(world, monkeypatch))
    assert _checked(world, cal, _openai_llm(world, monkeypatch))  # the control
    with pytest.raises(GeneratorMismatchError) as info:
        world.query(cal, _openai_llm(world, monkeypatch, **{setting: value}))
    assert info.value.fields and all(setting in f or "kwargs" in f for f in info.value.fields), info.value
    biased = world.calibrate(_openai_llm(world, monkeypatch, **{setting: value}))
    assert _checked(world, biased, _openai_llm(world, monkeypatch, **{setting: value}))
    other = {"12366": -100} if setting == "logit_bias" else {"type": "text"}
    with pytest.raises(GeneratorMismatchError):
        world.query(biased, _openai_llm(world, monkeypatch, **{setting: other}))


def test_a_pydantic_response_format_is_digested_by_its_schema() -> None:
    from pydantic import BaseModel

    from conformal_rag_plugins.answer_sets.identity import setting_digest

    class City(BaseModel):
        name: str

    class Country(BaseModel):
        code: int

    assert setting_digest(City) == setting_digest(City) and setting_digest(City) != setting_digest(Country)


SECRETS = ("sk-OLD-PLANTED-KEY", "OLD-PLANTED-BEARER")


def test_a_record_with_secrets_from_an_older_version_is_scrubbed_on_load(world, tmp_path) -> None:
    cal = world.calibrate(world.llm())
    data = json.loads(json.dumps(cal.to_dict()))  # a copy: to_dict shares the record
    data["generator"]["llm"]["api_key"] = SECRETS[0]
    data["generator"]["sampling"]["extra_headers"] = {"Authorization": f"Bearer {SECRETS[1]}"}
    data["generator"]["sampling"]["additional_kwargs"] = {"api_key": SECRETS[0], "top_k": 40}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(with_checksum({k: v for k, v in data.items() if k != "checksum"})))
    loaded = AnswerSetCalibration.load(path)
    assert "api_key" not in loaded.generator_["llm"] and "extra_headers" not in loaded.generator_["sampling"]
    assert loaded.generator_["sampling"]["additional_kwargs"] == {"top_k": 40}  # identifying keys kept
    again = loaded.save(tmp_path / "again.json").read_text()
    assert not [s for s in SECRETS if s in again] and "api_key" not in again and "Authorization" not in again
    assert loaded.generator_["llm"] == cal.generator_["llm"]


def test_scrubbing_keeps_a_missing_section_missing() -> None:
    """A record without its sampling section stays unchecked after the scrub (not an empty, comparable one)."""
    from conformal_rag_plugins.answer_sets.identity import scrub_record

    record = {"llm": {"class": "X", "name": "m", "api_key": "sk-1"}, "sampling": None}
    assert scrub_record(record) == {"llm": {"class": "X", "name": "m"}, "sampling": None}
    assert scrub_record({"llm": {"class": "X"}}) == {"llm": {"class": "X"}}
