"""Label calibration questions with an LLM judge over a framework host's ranking, written once.

Both adapters' public ``label_with_judge`` / ``alabel_with_judge`` are the methods of a
:class:`HostJudge` built from two readers the adapter supplies: ``read_llm`` (its LLM and prompt
templates as an :class:`~conformal_rag_plugins.labelling.llm.LLMTask`) and ``read_host`` (its
host and pool size as an async ``rank(question) -> [(chunk id, text), ...]``). The walk down the
ranking is :func:`~conformal_rag_plugins.labelling.llm_judge.alabel_examples`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..datasets.examples import CalibrationExample
from ..runtime.kv_cache import JsonCache, open_cache
from ..runtime.run_sync import run_sync
from .llm import LLMReader
from .llm_judge import LabelReport, LLMJudge, RankFn, alabel_examples
from .options import JudgeOptions
from .prompts import JUDGE_PROMPTS

#: ``read_host(host, pool_size) -> rank``: the framework's host as ``rank(question) -> [(id, text), ...]``.
HostReader = Callable[[Any, int | None], RankFn]


@dataclass(frozen=True)
class HostJudge:
    """The LLM-judge labelling of one framework: its host reader and its LLM reader.

    Attributes
    ----------
    read_llm : LLMReader
        The adapter's ``llm_task(llm, prompts, completion_prompt, chat_prompt)``.
    read_host : callable
        ``read_host(host, pool_size) -> rank``, ``rank(question)`` the host's ranking best
        first as ``(chunk id, text)`` pairs; it checks the host and pool size when called.

    Examples
    --------
    Any ranking and any async ``complete(prompt)`` will do; here a list is the host:

    >>> from conformal_rag_plugins.labelling.llm import LLMTask
    >>> plain = HostJudge(
    ...     read_llm=lambda llm, prompts, completion=None, chat=None: LLMTask.plain(llm, prompts.few_shot, model="f"),
    ...     read_host=lambda host, pool_size: lambda question: host[:pool_size],
    ... )
    >>> async def llm(prompt):
    ...     return "yes" if "Passage: Rollo led" in prompt else "no"
    >>> ranking = [("c1", "Vikings raided France."), ("c2", "Rollo led the Normans.")]
    >>> ex = CalibrationExample("Who led the Normans?", answers=("Rollo",))
    >>> (labelled,), report = plain.label_with_judge(ranking, [ex], llm, pool_size=2, cache=False)
    >>> labelled.gold_ids, labelled.metadata["judge_model"], report.by_judge
    (('c2',), 'f', 1)
    """

    read_llm: LLMReader
    read_host: HostReader

    async def alabel_with_judge(
        self,
        host: Any,
        examples: Sequence[CalibrationExample],
        llm: Any,
        budget: int = 5,
        *,
        pool_size: int | None = None,
        cache: JsonCache | str | Path | bool | None = True,
        options: JudgeOptions | None = None,
    ) -> tuple[list[CalibrationExample], LabelReport]:
        """Async :meth:`label_with_judge`."""
        options = options or JudgeOptions()
        rank = self.read_host(host, pool_size)
        task = self.read_llm(llm, JUDGE_PROMPTS, options.completion_prompt, options.chat_prompt)
        judge = LLMJudge.for_task(task, cache=open_cache(cache), options=options)
        return await alabel_examples(
            examples,
            rank,
            judge,
            budget=budget,
            max_concurrency=options.max_concurrency,
            judge_model=task.model,
            progress=options.progress,
        )

    def label_with_judge(
        self,
        host: Any,
        examples: Sequence[CalibrationExample],
        llm: Any,
        budget: int = 5,
        *,
        pool_size: int | None = None,
        cache: JsonCache | str | Path | bool | None = True,
        options: JudgeOptions | None = None,
    ) -> tuple[list[CalibrationExample], LabelReport]:
        """Find each question's first gold chunk in the host ranking with an LLM judge.

        The host's ranking is walked from the top; the question's source chunk ends the walk
        without a judge call, any other chunk is judged, and at most ``budget`` chunks are
        judged per question. Questions not resolved within the budget are kept with their
        source chunk as gold (a conservative label), never dropped. See
        :mod:`conformal_rag_plugins.labelling.llm_judge`. The result goes straight to the
        framework's ``calibrate_retriever`` with the same host.

        Parameters
        ----------
        host : the framework's host
            LlamaIndex: a ``VectorStoreIndex`` (queried as
            ``as_retriever(similarity_top_k=pool_size)``) or a ``BaseRetriever`` (``aretrieve``).
            LangChain: a ``VectorStore`` (``similarity_search_with_relevance_scores``) or a
            retriever setting ``metadata["score"]`` (e.g. ``ScoredFusionRetriever``).
        examples : sequence of CalibrationExample
            E.g. from ``generate_calibration_questions``.
        llm : the framework's LLM
            A LlamaIndex LLM, or a LangChain ``BaseLLM`` / ``BaseChatModel``. Base models get
            the yes/no few-shot completion prompt, chat models the chat prompt (variables
            ``{question}``, ``{answer}``, ``{context}``; see :class:`JudgeOptions`). Use temperature 0.
        budget : int
            Chunks judged per question at most.
        pool_size : int, optional
            Candidates per query. LlamaIndex: as in ``calibrate_retriever`` (an index: 50; a
            retriever: its ``similarity_top_k``, which must agree); LangChain: the host's
            ``k``, else 50.
        cache : JsonCache, path or bool
            Judge decisions; ``True`` (default) uses
            ``~/.cache/conformal-rag/calibration_llm.sqlite``, ``False`` none.
        options : JudgeOptions, optional
            Prompts, concurrency, timeout and retries per call, progress bar
            (:class:`~conformal_rag_plugins.labelling.options.JudgeOptions`).

        Returns
        -------
        examples : list of CalibrationExample
        report : LabelReport

        Examples
        --------
        >>> from conformal_rag_plugins.llamaindex import calibrate_retriever, label_with_judge
        >>> labelled, report = label_with_judge(index, examples, llm, budget=5)  # doctest: +SKIP
        >>> calibration = calibrate_retriever(index, labelled, confidence_level=0.9)  # doctest: +SKIP
        """
        return run_sync(
            self.alabel_with_judge(host, examples, llm, budget, pool_size=pool_size, cache=cache, options=options)
        )
