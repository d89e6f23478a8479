"""Generate calibration questions from a framework's chunks with its LLM, written once.

Both adapters' ``generate_calibration_questions`` / ``agenerate_calibration_questions`` are methods
of a :class:`QuestionWriter` built from the adapter's ``read_llm`` and ``read_chunks``; the work is
:func:`~conformal_rag_plugins.labelling.question_gen.agenerate_questions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..datasets.examples import CalibrationExample, CorpusEntry
from ..runtime.kv_cache import JsonCache, open_cache
from ..runtime.run_sync import run_sync
from .llm import LLMReader
from .options import QuestionOptions
from .prompts import QUESTION_PROMPTS
from .question_gen import GenerationReport, agenerate_questions

#: ``read_chunks(items) -> chunks``: the framework's nodes or documents (``CorpusEntry`` kept as they are).
ChunkReader = Callable[[Iterable[Any]], list[CorpusEntry]]


@dataclass(frozen=True)
class QuestionWriter:
    """The question generation of one framework: its LLM reader and its chunk reader (ids as in the host store).

    >>> from conformal_rag_plugins.labelling.llm import LLMTask
    >>> plain = QuestionWriter(
    ...     read_llm=lambda llm, prompts, completion=None, chat=None: LLMTask.plain(llm, prompts.few_shot, model="f"),
    ...     read_chunks=list,
    ... )
    >>> async def llm(prompt):
    ...     return '{"question": "Who led the Normans?", "answer": "Rollo"}'
    >>> chunks = [CorpusEntry("n1", "The Normans were led by Rollo, a Viking chief.")]
    >>> examples, report = plain.generate_calibration_questions(chunks, llm, 1, cache=False)
    >>> examples[0].gold_ids, examples[0].metadata["generated_by"], report.llm_calls
    (('n1',), 'f', 1)
    """

    read_llm: LLMReader
    read_chunks: ChunkReader

    async def agenerate_calibration_questions(
        self,
        chunks: Iterable[Any],
        llm: Any,
        n_questions: int,
        *,
        seed: int = 0,
        topic: str | None = None,
        cache: JsonCache | str | Path | bool | None = True,
        options: QuestionOptions | None = None,
    ) -> tuple[list[CalibrationExample], GenerationReport]:
        """Async :meth:`generate_calibration_questions`."""
        options = options or QuestionOptions()
        task = self.read_llm(llm, QUESTION_PROMPTS, options.completion_prompt, options.chat_prompt)
        return await agenerate_questions(
            self.read_chunks(chunks),
            task,
            n_questions,
            seed=seed,
            topic=topic,
            cache=open_cache(cache),
            options=options,
        )

    def generate_calibration_questions(
        self,
        chunks: Iterable[Any],
        llm: Any,
        n_questions: int,
        *,
        seed: int = 0,
        topic: str | None = None,
        cache: JsonCache | str | Path | bool | None = True,
        options: QuestionOptions | None = None,
    ) -> tuple[list[CalibrationExample], GenerationReport]:
        """Generate calibration questions from your chunks with your LLM, one per sampled chunk.

        Chunks are sampled evenly across documents (seeded); each output is parsed, filtered and retried
        up to ``options.max_retries`` times. The examples carry the chunk id as gold and go to
        ``label_with_judge`` or straight to ``calibrate_retriever``.

        Parameters
        ----------
        chunks : iterable of the framework's chunks, CorpusEntry or Chunk
            The indexed chunks, their ids the gold ids. LlamaIndex: ``BaseNode`` or ``NodeWithScore``
            (document: ``ref_doc_id``, else ``metadata["parent_id"]``). LangChain: ``Document`` with the
            vector store's id (document: ``metadata["doc_id"]``, else ``metadata["parent_id"]``, else
            ``metadata["source"]``).
        llm : the framework's LLM
            Base models get the completion prompt, chat models the chat prompt (see :class:`QuestionOptions`).
        n_questions : int
        seed : int
            Seeds the chunk sample.
        topic : str, optional
            Topic of interest, inserted into the prompt.
        cache : JsonCache, path or bool
            ``True`` (default): ``~/.cache/conformal-rag/calibration_llm.sqlite``; ``False``: none.
        options : QuestionOptions, optional
            Prompts, retries, concurrency, timeout, minimum chunk length, progress bar.

        Returns
        -------
        examples : list of CalibrationExample
        report : GenerationReport
            ``report.summary()`` gives the counts per rejection reason.

        Examples
        --------
        >>> from conformal_rag_plugins.labelling.options import QuestionOptions
        >>> from conformal_rag_plugins.llamaindex import generate_calibration_questions
        >>> examples, report = generate_calibration_questions(
        ...     nodes, llm, 200, topic="billing", options=QuestionOptions(max_concurrency=1)
        ... )  # doctest: +SKIP
        """
        return run_sync(
            self.agenerate_calibration_questions(
                chunks, llm, n_questions, seed=seed, topic=topic, cache=cache, options=options
            )
        )
