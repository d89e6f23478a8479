"""How the calibration LLM is asked and called: the option objects of the judge and of question generation.

Passed whole (``options=JudgeOptions(max_concurrency=1)``) to ``label_with_judge`` and
``generate_calibration_questions`` of either framework and to the framework-neutral engines.
The defaults are the library's defaults.
"""

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
        For base models: the framework's completion template (LlamaIndex ``PromptTemplate``,
        LangChain f-string ``PromptTemplate``, or a string in that form) with ``{question}``,
        ``{answer}``, ``{context}``; default the yes/no few-shot
        :data:`~conformal_rag_plugins.labelling.prompts.JUDGE_FEW_SHOT_TEMPLATE`.
    chat_prompt : framework chat prompt template, optional
        For chat models, same variables; default system + user messages.
    max_concurrency : int
        Questions labelled at once (each walk down the ranking is sequential).
    timeout : float, optional
        Seconds per LLM call.
    call_retries : int
        Further attempts of a failed or timed-out call; a call that still fails counts as "no".
    progress : bool
        Show a progress bar.

    Examples
    --------
    >>> JudgeOptions(max_concurrency=1).timeout
    60.0
    """

    completion_prompt: Any = None
    chat_prompt: Any = None
    max_concurrency: int = 4
    timeout: float | None = 60.0
    call_retries: int = 2
    progress: bool = False


@dataclass(frozen=True)
class QuestionOptions:
    """How calibration questions are asked for and checked.

    Attributes
    ----------
    completion_prompt : framework prompt template or str, optional
        For base models: variables ``{context}``, ``{topic}``, ``{topic_instruction}``; must
        ask for a ``{"question", "answer"}`` JSON object (LangChain's f-string templates double
        the literal braces). Default: three worked examples,
        :data:`~conformal_rag_plugins.labelling.prompts.QUESTION_FEW_SHOT_TEMPLATE`. Read when
        the framework's LLM is turned into an :class:`~conformal_rag_plugins.labelling.llm.LLMTask`;
        a task given directly carries its own prompt.
    chat_prompt : framework chat prompt template, optional
        For chat models, same variables.
    max_retries : int
        Further attempts per chunk after a rejected output.
    max_concurrency : int
        LLM calls in flight at once.
    timeout : float, optional
        Seconds per LLM call.
    call_retries : int
        Further attempts of a failed or timed-out call.
    min_words : int
        Chunks with fewer words are not used.
    progress : bool
        Show a progress bar.

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
