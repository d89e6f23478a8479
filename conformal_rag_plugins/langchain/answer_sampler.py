"""Sample answers through any LangChain chat or completion model, concurrently and cached."""

from __future__ import annotations

from functools import partial
from typing import Any

from langchain_core.language_models import BaseLLM
from langchain_core.outputs import LLMResult
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

from ..answer_sets.host import Embedding
from ..answer_sets.identity import SAMPLING_ATTRS, embedding_identity, json_settings
from ..answer_sets.prompts import CHAT_SYSTEM_PROMPT, CHAT_USER_TEMPLATE, FEW_SHOT_TEMPLATE
from ..answer_sets.sample_record import Sample, mean_logprob
from ..answer_sets.sampler import AnswerSampler
from ..local.llm import llama_cpp_identity
from .llm_calls import is_chat

DEFAULT_COMPLETION_PROMPT = PromptTemplate.from_template(FEW_SHOT_TEMPLATE)
DEFAULT_CHAT_PROMPT = ChatPromptTemplate.from_messages([("system", CHAT_SYSTEM_PROMPT), ("human", CHAT_USER_TEMPLATE)])


def embedder_identity(embeddings: Any) -> dict[str, Any] | None:
    """Name and dimension of LangChain embeddings (one probe call), for generator records."""
    if embeddings is None:
        return None
    from .fingerprint import describe_embeddings

    return embedding_identity(*describe_embeddings(embeddings))


def answer_embedding(embedder: Any) -> Embedding | None:
    """LangChain embeddings' ``embed_documents`` and lazy description (``None`` for none)."""
    if embedder is None:
        return None
    return Embedding(embedder.embed_documents, partial(embedder_identity, embedder))


def _to_sample(out: Any) -> Sample:
    if isinstance(out, str):
        return Sample.clean(out)
    usage = getattr(out, "usage_metadata", None) or {}
    logprob = mean_logprob((getattr(out, "response_metadata", None) or {}).get("logprobs"))
    return Sample.clean(str(out.content), usage.get("input_tokens", 0), usage.get("output_tokens", 0), logprob=logprob)


def _llm_result_sample(result: LLMResult) -> Sample:
    """A completion LLM's first generation with its reported usage and logprobs (a bare ``ainvoke`` drops
    ``llm_output["token_usage"]``, where OpenAI-compatible servers report it).
    """
    gen = result.generations[0][0]
    usage = (result.llm_output or {}).get("token_usage") or {}
    logprob = mean_logprob((gen.generation_info or {}).get("logprobs"))
    return Sample.clean(gen.text, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), logprob=logprob)


class LangChainSampler(AnswerSampler):
    """Draw ``n`` answers from a LangChain model (chat prompt or few-shot prompt), with the caller's run config.

    Examples
    --------
    >>> import asyncio
    >>> from langchain_core.language_models import FakeListChatModel
    >>> sampler = LangChainSampler(FakeListChatModel(responses=["Rollo"]), n_samples=2)
    >>> [s.text for s in asyncio.run(sampler.asample("Who?", "Rollo led them."))]
    ['Rollo', 'Rollo']
    """

    default_completion_prompt = DEFAULT_COMPLETION_PROMPT
    default_chat_prompt = DEFAULT_CHAT_PROMPT

    @property
    def prompt(self) -> PromptTemplate | ChatPromptTemplate:
        return self.chat_prompt if is_chat(self.model) else self.completion_prompt

    def _prompt_text(self) -> str:
        return repr(self.prompt)

    name_attrs = ("model_name", "model", "model_path")
    kwargs_attrs = ("model_kwargs",)

    def _llm_identity(self) -> dict[str, Any]:
        # a llama.cpp model is named by its file and digest, not by the path it was loaded from
        return {**super()._llm_identity(), **(llama_cpp_identity(getattr(self.model, "client", None)) or {})}

    def _sampling_settings(self) -> dict[str, Any]:
        # LangChain models list the parameters of every call in ``_default_params`` (LlamaCpp, OpenAI, ...)
        try:
            params = getattr(self.model, "_default_params", None)
        except Exception:  # a client that cannot list its parameters yet
            params = None
        if isinstance(params, dict):
            own = json_settings(params, [k for k in params if k not in ("model", "model_name")])
            return {**own, **json_settings(self.model, (), self.kwargs_attrs)}
        return json_settings(self.model, SAMPLING_ATTRS, self.kwargs_attrs)

    def _prompt_kind(self) -> str:
        return "chat" if is_chat(self.model) else "completion"

    async def _call(self, question: str, context: str, config: Any = None) -> Sample:
        value = self.prompt.invoke({"context": context, "question": question})
        if isinstance(self.model, BaseLLM):
            cfg = config or {}
            result = await self.model.agenerate_prompt(
                [value], callbacks=cfg.get("callbacks"), tags=cfg.get("tags"), metadata=cfg.get("metadata")
            )
            return _llm_result_sample(result)
        return _to_sample(await self.model.ainvoke(value, config=config))
