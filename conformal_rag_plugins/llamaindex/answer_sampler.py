"""Sample answers through any LlamaIndex LLM (completion or chat), concurrently and cached."""

from __future__ import annotations

from functools import partial
from typing import Any

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType

from ..answer_sets.host import Embedding
from ..answer_sets.identity import embedding_identity
from ..answer_sets.prompts import CHAT_SYSTEM_PROMPT, CHAT_USER_TEMPLATE, FEW_SHOT_TEMPLATE
from ..answer_sets.sample_record import Sample, mean_logprob
from ..answer_sets.sampler import AnswerSampler, model_id  # noqa: F401 (model_id: re-exported for callers)
from ..local.llm import llama_cpp_identity
from .llm_calls import is_chat

DEFAULT_COMPLETION_PROMPT = PromptTemplate(FEW_SHOT_TEMPLATE)
DEFAULT_CHAT_PROMPT = ChatPromptTemplate(
    [
        ChatMessage(role=MessageRole.SYSTEM, content=CHAT_SYSTEM_PROMPT),
        ChatMessage(role=MessageRole.USER, content=CHAT_USER_TEMPLATE),
    ]
)


def embedder_identity(embed_model: Any) -> dict[str, Any] | None:
    """Name and dimension of a LlamaIndex embedding model (one probe call), for generator records."""
    if embed_model is None:
        return None
    from .fingerprint import _embed_description

    return embedding_identity(*_embed_description(embed_model))


def answer_embedding(embedder: Any) -> Embedding | None:
    """An embedding model's ``get_text_embedding_batch`` and lazy description (``None`` for none)."""
    if embedder is None:
        return None
    return Embedding(embedder.get_text_embedding_batch, partial(embedder_identity, embedder))


def _usage(raw: Any) -> tuple[int, int]:
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is None:
        return 0, 0
    get = usage.get if isinstance(usage, dict) else (lambda k, d=0: getattr(usage, k, d))
    return int(get("prompt_tokens", 0) or 0), int(get("completion_tokens", 0) or 0)


class LlamaIndexSampler(AnswerSampler):
    """Draw ``n`` answers from a LlamaIndex LLM: ``acomplete`` with the few-shot prompt, or ``achat`` for chat models.

    Examples
    --------
    >>> import asyncio
    >>> from llama_index.core.llms import MockLLM
    >>> sampler = LlamaIndexSampler(MockLLM(max_tokens=2), n_samples=3)
    >>> len(asyncio.run(sampler.asample("Who?", "Rollo led them.")))
    3
    """

    default_completion_prompt = DEFAULT_COMPLETION_PROMPT
    default_chat_prompt = DEFAULT_CHAT_PROMPT

    @property
    def llm(self) -> BaseLLM:
        return self.model

    @property
    def is_chat(self) -> bool:
        return is_chat(self.llm)

    def _prompt_text(self) -> str:
        if self.is_chat:
            return "\n".join(str(m.content) for m in self.chat_prompt.message_templates)
        return self.completion_prompt.get_template()

    def _llm_identity(self) -> dict[str, Any]:
        # a llama.cpp model is named by its file and digest, not by the path it was loaded from
        return {**super()._llm_identity(), **(llama_cpp_identity(getattr(self.llm, "_model", None)) or {})}

    def _prompt_kind(self) -> str:
        return "chat" if self.is_chat else "completion"

    async def _call(self, question: str, context: str, config: Any = None) -> Sample:
        if self.is_chat:
            messages = self.chat_prompt.format_messages(context=context, question=question)
            resp = await self.llm.achat(messages)
            return Sample.clean(str(resp.message.content or ""), *_usage(resp.raw), logprob=mean_logprob(resp.raw))
        prompt = self.completion_prompt.format(context=context, question=question)
        resp = await self.llm.acomplete(prompt, formatted=True)
        return Sample.clean(resp.text, *_usage(resp.raw), logprob=mean_logprob(resp.raw))


class SamplerPrompts:
    """Mixin (before ``BaseSynthesizer``): prompt keys ``completion_prompt`` and ``chat_prompt`` of ``self.sampler``."""

    sampler: LlamaIndexSampler

    def _get_prompts(self) -> PromptDictType:
        return {"completion_prompt": self.sampler.completion_prompt, "chat_prompt": self.sampler.chat_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "completion_prompt" in prompts:
            self.sampler.completion_prompt = prompts["completion_prompt"]  # type: ignore[assignment]
        if "chat_prompt" in prompts:
            self.sampler.chat_prompt = prompts["chat_prompt"]  # type: ignore[assignment]
