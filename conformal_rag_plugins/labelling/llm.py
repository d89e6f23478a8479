"""The small LLM interface that labelling is written against, whatever the framework.

A labelling task (question generation, the judge) needs three things of an LLM: render its
prompt from named values, complete that prompt asynchronously, and an identity for cache keys
and records. :class:`LLMTask` holds them. A framework adapter supplies an :class:`LLMReader`
(``llamaindex/llm_calls.py``, ``langchain/llm_calls.py``: ``llm_task``) that turns its own LLM
and prompt templates into an :class:`LLMTask`; a plain ``async complete(prompt) -> str``
callable becomes one with :meth:`LLMTask.plain`.

The rendered prompt text is also the cache key, so two renderings of the same prompt must be
equal strings (a chat prompt travels as the JSON of its messages).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.errors import ConformalError
from .prompts import PromptSet, fill

RenderFn = Callable[[Mapping[str, str]], str]
CompleteFn = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class LLMTask:
    """A user's LLM made ready for one calibration task, whatever its framework.

    Attributes
    ----------
    render : callable
        ``render(values) -> prompt text`` (also the cache key).
    complete : async callable
        ``complete(prompt text) -> output``.
    model : str
        Model id, part of cache keys and records.
    temperature : float, optional
        Part of cache keys only.

    Examples
    --------
    >>> import asyncio
    >>> async def shout(prompt):
    ...     return prompt.upper()
    >>> task = LLMTask.plain(shout, "Q: {question}", model="fake")
    >>> asyncio.run(task.complete(task.render({"question": "who?"}))), task.model
    ('Q: WHO?', 'fake')
    """

    render: RenderFn
    complete: CompleteFn
    model: str = "unknown"
    temperature: float | None = None

    @classmethod
    def plain(
        cls, complete: CompleteFn, prompt: str | RenderFn, *, model: str = "unknown", temperature: float | None = None
    ) -> LLMTask:
        """A plain async ``complete(prompt) -> str`` with a template or a ``render`` callable.

        A template string has ``{name}`` placeholders filled by
        :func:`~conformal_rag_plugins.labelling.prompts.fill` (other braces stay as they are).
        """
        if callable(prompt):
            return cls(prompt, complete, model, temperature)
        template = prompt
        return cls(lambda values: fill(template, values), complete, model, temperature)


class LLMReader(Protocol):
    """What a framework adapter supplies: its LLM and prompt templates as an :class:`LLMTask`.

    ``completion_prompt`` and ``chat_prompt`` are the user's templates in the framework's own
    types (``None``: the defaults of ``prompts``); a base model gets the completion prompt, a
    chat model the chat prompt. Unknown template variables raise
    :class:`~conformal_rag_plugins.core.errors.ConformalError` (see :func:`check_prompt_variables`).
    """

    def __call__(
        self, llm: Any, prompts: PromptSet, completion_prompt: Any = None, chat_prompt: Any = None, /
    ) -> LLMTask: ...


def check_prompt_variables(template_vars: Collection[str], allowed: Collection[str]) -> None:
    """Refuse a prompt template whose variables are not among ``allowed``.

    Examples
    --------
    >>> check_prompt_variables(["context"], ["context", "topic"])
    >>> check_prompt_variables(["passage"], ["context"])
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: Unknown prompt variable(s) ['passage']; the prompt can use ...
    """
    unknown = sorted(set(template_vars) - set(allowed))
    if unknown:
        raise ConformalError(f"Unknown prompt variable(s) {unknown}; the prompt can use {sorted(allowed)}.")
