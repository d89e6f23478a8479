"""Sample answers through any LangChain chat or completion model, concurrently and cached."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel, BaseLanguageModel, BaseLLM
from langchain_core.outputs import LLMResult
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

from ..generation import (
    CHAT_SYSTEM_PROMPT,
    CHAT_USER_TEMPLATE,
    FEW_SHOT_TEMPLATE,
    Sample,
    SampleCache,
    mean_logprob,
    reports_logprobs,
)
from ..generation.draw import ConcurrencyLimit, draw_samples

__all__ = ["DEFAULT_CHAT_PROMPT", "DEFAULT_COMPLETION_PROMPT", "LangChainSampler", "model_id"]

DEFAULT_COMPLETION_PROMPT = PromptTemplate.from_template(FEW_SHOT_TEMPLATE)
DEFAULT_CHAT_PROMPT = ChatPromptTemplate.from_messages([("system", CHAT_SYSTEM_PROMPT), ("human", CHAT_USER_TEMPLATE)])


def model_id(model: Any) -> str:
    """A stable identifier of the model for cache keys and calibration records."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None) or getattr(model, "model_path", None)
    # samples drawn with logprobs carry a likelihood, so they must not share cache entries with those without
    return f"{type(model).__name__}:{name}" + ("+logprobs" if reports_logprobs(model) else "")


def _to_sample(out: Any) -> Sample:
    if isinstance(out, str):
        return Sample.clean(out)
    usage = getattr(out, "usage_metadata", None) or {}
    logprob = mean_logprob((getattr(out, "response_metadata", None) or {}).get("logprobs"))
    return Sample.clean(str(out.content), usage.get("input_tokens", 0), usage.get("output_tokens", 0), logprob=logprob)


def _llm_result_sample(result: LLMResult) -> Sample:
    """A completion LLM's first generation, with the token usage and logprobs the provider reported (if any).

    ``ainvoke`` on a completion LLM returns a bare string and drops usage, which OpenAI-compatible
    servers report in ``llm_output["token_usage"]``.
    """
    gen = result.generations[0][0]
    usage = (result.llm_output or {}).get("token_usage") or {}
    logprob = mean_logprob((gen.generation_info or {}).get("logprobs"))
    return Sample.clean(gen.text, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), logprob=logprob)


class LangChainSampler:
    """Draw ``n`` answers for (question, context) from a LangChain model.

    Chat models get the chat prompt, completion LLMs the few-shot prompt. Calls run
    concurrently under ``max_concurrency``, time out, retry with backoff; a call that
    still fails becomes an empty (abstaining) sample.

    Examples
    --------
    >>> import asyncio
    >>> from langchain_core.language_models import FakeListChatModel
    >>> sampler = LangChainSampler(FakeListChatModel(responses=["Rollo"]), n_samples=2)
    >>> [s.text for s in asyncio.run(sampler.asample("Who?", "Rollo led them."))]
    ['Rollo', 'Rollo']
    """

    def __init__(
        self,
        model: BaseLanguageModel,
        *,
        n_samples: int = 10,
        completion_prompt: PromptTemplate | None = None,
        chat_prompt: ChatPromptTemplate | None = None,
        max_concurrency: int = 4,
        timeout: float | None = 120.0,
        retries: int = 2,
        cache: SampleCache | None = None,
    ) -> None:
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}.")
        self.model = model
        self.n_samples = n_samples
        self.completion_prompt = completion_prompt or DEFAULT_COMPLETION_PROMPT
        self.chat_prompt = chat_prompt or DEFAULT_CHAT_PROMPT
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.retries = retries
        self.cache = cache
        self._limit = ConcurrencyLimit(max_concurrency)

    @property
    def prompt(self) -> PromptTemplate | ChatPromptTemplate:
        """The prompt in use for this model."""
        return self.chat_prompt if isinstance(self.model, BaseChatModel) else self.completion_prompt

    async def asample(self, question: str, context: str) -> list[Sample]:
        """``n_samples`` answers, from the cache when present."""
        key = SampleCache.key(
            question,
            context,
            model_id(self.model),
            repr(self.prompt),
            getattr(self.model, "temperature", None),
            self.n_samples,
        )
        value = self.prompt.invoke({"context": context, "question": question})

        async def call() -> Sample:
            if isinstance(self.model, BaseLLM):
                return _llm_result_sample(await self.model.agenerate_prompt([value]))
            return _to_sample(await self.model.ainvoke(value))

        return await draw_samples(
            call,
            n=self.n_samples,
            max_concurrency=self.max_concurrency,
            retries=self.retries,
            timeout=self.timeout,
            cache=self.cache,
            key=key,
            limit=self._limit,
        )
