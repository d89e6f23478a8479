"""A LlamaIndex LLM and its prompt templates as ``render`` / ``complete`` callables (an ``LLMTask``).

A base model gets the completion ``PromptTemplate`` and ``acomplete(prompt, formatted=True)``; a
chat model (``llm.metadata.is_chat_model``) the ``ChatPromptTemplate``, whose formatted messages
travel as a JSON string (also the cache key) and are rebuilt for ``achat``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate

from ..answer_sets.sampler import model_id
from ..core.errors import ConformalError
from ..labelling.llm import CompleteFn, LLMTask, RenderFn, check_prompt_variables
from ..labelling.prompts import PromptSet
from ..runtime.native_models import one_at_a_time


def is_chat(llm: Any) -> bool:
    """Whether the LLM is a chat model (``llm.metadata.is_chat_model``).

    >>> from llama_index.core.llms import MockLLM
    >>> is_chat(MockLLM())
    False
    """
    return bool(getattr(getattr(llm, "metadata", None), "is_chat_model", False))


def completion_template(prompt: PromptTemplate | str | None, default: str) -> PromptTemplate:
    if prompt is None:
        return PromptTemplate(default)
    return PromptTemplate(prompt) if isinstance(prompt, str) else prompt


def chat_template(prompt: ChatPromptTemplate | None, system: str, user: str) -> ChatPromptTemplate:
    if prompt is not None:
        return prompt
    return ChatPromptTemplate(
        [ChatMessage(role=MessageRole.SYSTEM, content=system), ChatMessage(role=MessageRole.USER, content=user)]
    )


def prompt_caller(
    llm: Any,
    completion_prompt: PromptTemplate,
    chat_prompt: ChatPromptTemplate,
    variables: Collection[str],
) -> tuple[RenderFn, CompleteFn]:
    """``render(values) -> prompt text`` and ``complete(prompt text) -> output`` for ``llm``.

    >>> import asyncio
    >>> from llama_index.core.llms import MockLLM
    >>> render, complete = prompt_caller(MockLLM(), PromptTemplate("Q: {question}"), chat_template(None, "", ""),
    ...                                  ["question"])
    >>> asyncio.run(complete(render({"question": "Who?"})))
    'Q: Who?'
    """
    if not (hasattr(llm, "acomplete") and hasattr(llm, "achat")):
        raise ConformalError(f"Expected a LlamaIndex LLM (with acomplete/achat), got {type(llm).__name__}.")
    if is_chat(llm):
        check_prompt_variables(chat_prompt.template_vars, variables)

        def render_chat(values: Mapping[str, str]) -> str:
            messages = chat_prompt.format_messages(**values)
            return json.dumps([{"role": m.role.value, "content": m.content} for m in messages], ensure_ascii=False)

        async def complete_chat(text: str) -> str:
            messages = [ChatMessage(role=MessageRole(d["role"]), content=d["content"]) for d in json.loads(text)]
            response = await one_at_a_time(llm, lambda: llm.achat(messages))
            return str(response.message.content or "")

        return render_chat, complete_chat

    check_prompt_variables(completion_prompt.template_vars, variables)

    def render_completion(values: Mapping[str, str]) -> str:
        return completion_prompt.format(**values)

    async def complete_text(text: str) -> str:
        return (await one_at_a_time(llm, lambda: llm.acomplete(text, formatted=True))).text

    return render_completion, complete_text


def llm_task(
    llm: Any,
    prompts: PromptSet,
    completion_prompt: PromptTemplate | str | None = None,
    chat_prompt: ChatPromptTemplate | None = None,
) -> LLMTask:
    """The LLM and prompts (or the task's defaults) as the adapter's :class:`LLMTask`.

    >>> from llama_index.core.llms import MockLLM
    >>> from conformal_rag_plugins.labelling.prompts import JUDGE_PROMPTS
    >>> llm_task(MockLLM(), JUDGE_PROMPTS).model
    'MockLLM:None'
    """
    completion = completion_template(completion_prompt, prompts.few_shot)
    chat = chat_template(chat_prompt, prompts.chat_system, prompts.chat_user)
    render, complete = prompt_caller(llm, completion, chat, prompts.variables)
    return LLMTask(render, complete, model_id(llm), getattr(llm, "temperature", None))
