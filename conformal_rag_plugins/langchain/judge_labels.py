"""Label calibration questions with a LangChain judge over the host store or retriever (CONFLARE step 2).

Thin adapter over :mod:`conformal_rag_plugins.labelling.llm_judge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

from ..datasets.examples import CalibrationExample
from ..labelling.llm_judge import LabelReport, LLMJudge, alabel_examples
from ..labelling.prompts import JUDGE_PROMPTS
from ..runtime.kv_cache import JsonCache, open_cache
from ..runtime.run_sync import run_sync
from .calibrate import resolve_pool_size
from .host import Host, afetch_pool
from .llm_calls import llm_task

__all__ = ["alabel_with_judge", "label_with_judge"]


async def alabel_with_judge(
    host: Host,
    examples: Sequence[CalibrationExample],
    llm: Any,
    budget: int = 5,
    *,
    pool_size: int | None = None,
    completion_prompt: PromptTemplate | str | None = None,
    chat_prompt: ChatPromptTemplate | None = None,
    cache: JsonCache | str | Path | bool | None = True,
    max_concurrency: int = 4,
    timeout: float | None = 60.0,
    progress: bool = False,
) -> tuple[list[CalibrationExample], LabelReport]:
    """Async :func:`label_with_judge`."""
    size = resolve_pool_size(host, pool_size)
    task = llm_task(llm, JUDGE_PROMPTS, completion_prompt, chat_prompt)
    judge = LLMJudge.for_task(task, cache=open_cache(cache), timeout=timeout)

    async def rank(question: str) -> list[tuple[str | None, str]]:
        pool, _ = await afetch_pool(host, question, size)
        return list(zip(pool.ids, pool.texts, strict=True))

    return await alabel_examples(
        examples, rank, judge, budget=budget, max_concurrency=max_concurrency, judge_model=task.model, progress=progress
    )


def label_with_judge(
    host: Host,
    examples: Sequence[CalibrationExample],
    llm: Any,
    budget: int = 5,
    *,
    pool_size: int | None = None,
    completion_prompt: PromptTemplate | str | None = None,
    chat_prompt: ChatPromptTemplate | None = None,
    cache: JsonCache | str | Path | bool | None = True,
    max_concurrency: int = 4,
    timeout: float | None = 60.0,
    progress: bool = False,
) -> tuple[list[CalibrationExample], LabelReport]:
    """Find each question's first gold document in the host ranking with an LLM judge.

    The host's ranking is walked from the top; the question's source document ends the walk
    without a judge call, any other document is judged, and at most ``budget`` documents are
    judged per question. Questions not resolved within the budget are kept with their source
    document as gold (a conservative label), never dropped. See
    :mod:`conformal_rag_plugins.labelling.llm_judge`. The result goes straight to
    :func:`calibrate_retriever` with the same host.

    Parameters
    ----------
    host : VectorStore or BaseRetriever
        A store queried with ``similarity_search_with_relevance_scores``, or a retriever
        setting ``metadata["score"]`` (e.g. :class:`ScoredFusionRetriever`).
    examples : sequence of CalibrationExample
        E.g. from :func:`generate_calibration_questions`.
    llm : BaseLLM or BaseChatModel
        Completion models get the yes/no few-shot ``completion_prompt``, chat models
        ``chat_prompt`` (variables ``{question}``, ``{answer}``, ``{context}``). Use temperature 0.
    budget : int
    pool_size : int, optional
        Candidates per query (default: the host's ``k``, else 50).
    cache : JsonCache, path or bool
        Judge decisions; ``True`` (default) uses ``~/.cache/conformal-rag/calibration_llm.sqlite``.
    max_concurrency, timeout, progress

    Returns
    -------
    examples : list of CalibrationExample
    report : LabelReport

    Examples
    --------
    >>> labelled, report = label_with_judge(vectorstore, examples, llm, budget=5)  # doctest: +SKIP
    >>> calibration = calibrate_retriever(vectorstore, labelled, confidence_level=0.9)  # doctest: +SKIP
    """
    return run_sync(
        alabel_with_judge(
            host,
            examples,
            llm,
            budget,
            pool_size=pool_size,
            completion_prompt=completion_prompt,
            chat_prompt=chat_prompt,
            cache=cache,
            max_concurrency=max_concurrency,
            timeout=timeout,
            progress=progress,
        )
    )
