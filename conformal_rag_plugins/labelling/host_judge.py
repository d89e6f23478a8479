"""Label calibration questions with an LLM judge over a framework host's ranking, written once.

Both adapters' ``label_with_judge`` / ``alabel_with_judge`` are methods of a :class:`HostJudge`
built from the adapter's ``read_llm`` and ``read_host``; the walk is
:func:`~conformal_rag_plugins.labelling.llm_judge.alabel_examples`.
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
    """The LLM-judge labelling of one framework: its LLM reader and its host reader.

    ``read_host(host, pool_size)`` checks the host when called and returns an async
    ``rank(question) -> [(chunk id, text), ...]``, best first.

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

        The ranking is walked from the top: the question's source chunk ends the walk without a judge
        call, other chunks are judged, at most ``budget`` per question. Questions not resolved within the
        budget are kept with their source chunk as gold (a conservative label), never dropped. The result
        goes straight to ``calibrate_retriever`` with the same host.

        Parameters
        ----------
        host : the framework's host
            LlamaIndex: a ``VectorStoreIndex`` or a ``BaseRetriever``. LangChain: a ``VectorStore`` or a
            retriever setting ``metadata["score"]`` (e.g. ``ScoredFusionRetriever``).
        examples : sequence of CalibrationExample
            E.g. from ``generate_calibration_questions``.
        llm : the framework's LLM
            Base models get the yes/no few-shot completion prompt, chat models the chat prompt (see
            :class:`JudgeOptions`). Use temperature 0.
        budget : int
            Chunks judged per question at most.
        pool_size : int, optional
            Candidates per query, as in ``calibrate_retriever`` (default 50, or the retriever's own
            ``similarity_top_k`` / ``k``, which must agree).
        cache : JsonCache, path or bool
            Judge decisions; ``True`` (default) uses ``~/.cache/conformal-rag/calibration_llm.sqlite``, ``False`` none.
        options : JudgeOptions, optional
            Prompts, concurrency, timeout, retries, progress bar.

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
