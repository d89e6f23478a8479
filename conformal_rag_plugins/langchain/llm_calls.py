"""A LangChain model and its prompt templates as ``render`` / ``complete`` callables (an ``LLMTask``).

A ``BaseLLM`` gets the ``PromptTemplate`` and ``ainvoke(str)``; a ``BaseChatModel`` the
``ChatPromptTemplate``, whose messages travel as a JSON string (also the cache key, via
``messages_to_dict``) rebuilt for ``ainvoke(messages)``. The default templates have their
literal JSON braces escaped for LangChain's f-string format.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import messages_from_dict, messages_to_dict
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

from ..answer_sets.sampler import model_id as _model_id
from ..core.errors import ConformalError
from ..labelling.llm import CompleteFn, LLMTask, RenderFn, check_prompt_variables
from ..labelling.prompts import PromptSet, to_fstring
from ..runtime.native_models import one_at_a_time


def is_chat(model: Any) -> bool:
    """Whether the model is a chat model (``BaseChatModel``).

    >>> from langchain_core.language_models import FakeListChatModel, FakeListLLM
    >>> is_chat(FakeListChatModel(responses=["x"])), is_chat(FakeListLLM(responses=["x"]))
    (True, False)
    """
    return isinstance(model, BaseChatModel)


def completion_template(
    prompt: PromptTemplate | str | None, default: str, variables: Collection[str]
) -> PromptTemplate:
    """The user's completion prompt (a ``str`` is an f-string template), or ``default``."""
    if prompt is None:
        return PromptTemplate.from_template(to_fstring(default, variables))
    return PromptTemplate.from_template(prompt) if isinstance(prompt, str) else prompt


def chat_template(
    prompt: ChatPromptTemplate | None, system: str, user: str, variables: Collection[str]
) -> ChatPromptTemplate:
    if prompt is not None:
        return prompt
    return ChatPromptTemplate.from_messages(
        [("system", to_fstring(system, variables)), ("human", to_fstring(user, variables))]
    )


def _pick(prompt: PromptTemplate | ChatPromptTemplate, values: Mapping[str, str]) -> dict[str, str]:
    return {k: values[k] for k in prompt.input_variables}


def prompt_caller(
    model: Any,
    completion_prompt: PromptTemplate,
    chat_prompt: ChatPromptTemplate,
    variables: Collection[str],
) -> tuple[RenderFn, CompleteFn]:
    """``render(values) -> prompt text`` and ``complete(prompt text) -> output`` for ``model``.

    >>> import asyncio
    >>> from langchain_core.language_models import FakeListChatModel
    >>> plain = completion_template(None, "Q: {question}", ["question"])
    >>> chat = chat_template(None, "Be brief.", "Q: {question}", ["question"])
    >>> render, complete = prompt_caller(FakeListChatModel(responses=["yes"]), plain, chat, ["question"])
    >>> asyncio.run(complete(render({"question": "Who?"})))
    'yes'
    """
    if not isinstance(model, BaseLanguageModel):
        raise ConformalError(f"Expected a LangChain BaseLLM or BaseChatModel, got {type(model).__name__}.")
    if is_chat(model):
        check_prompt_variables(chat_prompt.input_variables, variables)

        def render_chat(values: Mapping[str, str]) -> str:
            messages = chat_prompt.format_messages(**_pick(chat_prompt, values))
            return json.dumps(messages_to_dict(messages), ensure_ascii=False)

        async def complete_chat(text: str) -> str:
            out = await one_at_a_time(model, lambda: model.ainvoke(messages_from_dict(json.loads(text))))
            return str(out.content)

        return render_chat, complete_chat

    check_prompt_variables(completion_prompt.input_variables, variables)

    def render_completion(values: Mapping[str, str]) -> str:
        return completion_prompt.format(**_pick(completion_prompt, values))

    async def complete_text(text: str) -> str:
        out = await one_at_a_time(model, lambda: model.ainvoke(text))
        return out if isinstance(out, str) else str(getattr(out, "content", out))

    return render_completion, complete_text


def model_id(model: Any) -> str:
    """A stable identifier of the model for cache keys and calibration records."""
    return _model_id(model, ("model_name", "model", "model_path"))


def llm_task(
    model: Any,
    prompts: PromptSet,
    completion_prompt: PromptTemplate | str | None = None,
    chat_prompt: ChatPromptTemplate | None = None,
) -> LLMTask:
    """The model and prompts (or the task's defaults) as the adapter's :class:`LLMTask`.

    >>> from langchain_core.language_models import FakeListLLM
    >>> from conformal_rag_plugins.labelling.prompts import JUDGE_PROMPTS
    >>> llm_task(FakeListLLM(responses=["yes"]), JUDGE_PROMPTS).model
    'FakeListLLM:None'
    """
    completion = completion_template(completion_prompt, prompts.few_shot, prompts.variables)
    chat = chat_template(chat_prompt, prompts.chat_system, prompts.chat_user, prompts.variables)
    render, complete = prompt_caller(model, completion, chat, prompts.variables)
    return LLMTask(render, complete, model_id(model), getattr(model, "temperature", None))
