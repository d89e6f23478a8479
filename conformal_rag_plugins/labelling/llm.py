"""The small LLM interface labelling is written against: render a prompt, complete it, an identity.

Adapters turn their LLM and templates into an :class:`LLMTask` with their :class:`LLMReader`
(``llm_task``). The rendered prompt is also the cache key, so equal prompts must render to equal
strings (a chat prompt travels as the JSON of its messages).
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
    """A user's LLM for one calibration task: ``render``, async ``complete``, ``model``/``temperature`` (cache key).

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
        """A plain async ``complete(prompt) -> str`` with a template (filled by :func:`fill`) or ``render``."""
        if callable(prompt):
            return cls(prompt, complete, model, temperature)
        template = prompt
        return cls(lambda values: fill(template, values), complete, model, temperature)


class LLMReader(Protocol):
    """What a framework adapter supplies: its LLM and prompt templates as an :class:`LLMTask`.

    Base models get ``completion_prompt``, chat models ``chat_prompt`` (``None``: the defaults);
    unknown template variables raise (:func:`check_prompt_variables`).
    """

    def __call__(
        self, llm: Any, prompts: PromptSet, completion_prompt: Any = None, chat_prompt: Any = None, /
    ) -> LLMTask: ...


def check_prompt_variables(template_vars: Collection[str], allowed: Collection[str]) -> None:
    """Refuse a prompt template whose variables are not among ``allowed``.

    >>> check_prompt_variables(["context"], ["context", "topic"])
    >>> check_prompt_variables(["passage"], ["context"])
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: Unknown prompt variable(s) ['passage']; the prompt can use ...
    """
    unknown = sorted(set(template_vars) - set(allowed))
    if unknown:
        raise ConformalError(f"Unknown prompt variable(s) {unknown}; the prompt can use {sorted(allowed)}.")
