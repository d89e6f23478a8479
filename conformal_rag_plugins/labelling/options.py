"""Option objects of the calibration LLM: how the judge and question generation are asked and called."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Chunks with fewer words are not used to generate questions.
DEFAULT_MIN_WORDS = 5


@dataclass(frozen=True)
class JudgeOptions:
    """How the LLM judge is asked and called.

    Attributes
    ----------
    completion_prompt : framework prompt template or str, optional
        For base models, with ``{question}``, ``{answer}``, ``{context}``; default
        :data:`~conformal_rag_plugins.labelling.prompts.JUDGE_FEW_SHOT_TEMPLATE` (yes/no few-shot).
    chat_prompt : framework chat prompt template, optional
        For chat models, same variables; default system + user messages.
    max_concurrency : int
        Questions labelled at once (each walk down the ranking is sequential).
    timeout : float, optional
        Seconds per LLM call.
    call_retries : int
        Further attempts of a failed call; a call that still fails counts as "no".
    progress : bool
    dead_after : int or None
        Stop the run with :class:`~conformal_rag_plugins.core.errors.LLMUnavailableError` once this
        many calls have failed (after their retries) before any call was answered: a dead endpoint
        stops within seconds instead of labelling every question "budget-exhausted". ``None``: never.

    Examples
    --------
    >>> JudgeOptions(max_concurrency=1).timeout, JudgeOptions().dead_after
    (60.0, 3)
    """

    completion_prompt: Any = None
    chat_prompt: Any = None
    max_concurrency: int = 4
    timeout: float | None = 60.0
    call_retries: int = 2
    progress: bool = False
    dead_after: int | None = 3


@dataclass(frozen=True)
class QuestionOptions:
    """How calibration questions are asked for and checked.

    Attributes
    ----------
    completion_prompt : framework prompt template or str, optional
        For base models, with ``{context}``, ``{topic}``, ``{topic_instruction}``; must ask for a
        ``{"question", "answer"}`` JSON object (LangChain f-string templates double literal braces).
        Default :data:`~conformal_rag_plugins.labelling.prompts.QUESTION_FEW_SHOT_TEMPLATE`. Not read
        for an :class:`~conformal_rag_plugins.labelling.llm.LLMTask` given directly.
    chat_prompt : framework chat prompt template, optional
        For chat models, same variables.
    max_retries : int
        Further attempts per chunk after a rejected output.
    max_concurrency : int
        LLM calls in flight at once.
    timeout : float, optional
        Seconds per LLM call.
    call_retries : int
        Further attempts of a failed call.
    min_words : int
        Chunks with fewer words are not used.
    progress : bool
    passage_sentences : int, optional
        Show the LLM only this many consecutive sentences of each chunk (a seeded window, another one on
        each retry); the answer is still checked against the whole chunk, whose id stays the gold. ``None``
        (default): the whole chunk. Small base models write usable questions far more often from a short
        passage (Gemma 3 270M: about twice as often with 3 sentences).

    Examples
    --------
    >>> QuestionOptions(max_concurrency=1).max_retries, QuestionOptions().timeout
    (2, 120.0)
    """

    completion_prompt: Any = None
    chat_prompt: Any = None
    max_retries: int = 2
    max_concurrency: int = 4
    timeout: float | None = 120.0
    call_retries: int = 2
    min_words: int = DEFAULT_MIN_WORDS
    progress: bool = False
    passage_sentences: int | None = None
