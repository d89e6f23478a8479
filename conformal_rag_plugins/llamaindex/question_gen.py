"""Generate calibration questions from LlamaIndex nodes with a LlamaIndex LLM (CONFLARE step 1).

Thin adapter over :mod:`conformal_rag_plugins.labelling.question_gen`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..labelling.chunk_records import Chunk
from ..labelling.prompts import QUESTION_PROMPTS
from ..labelling.question_gen import DEFAULT_MIN_WORDS, GenerationReport, agenerate_questions
from ..runtime.kv_cache import JsonCache, open_cache
from ..runtime.run_sync import run_sync
from .llm_calls import llm_task

__all__ = ["agenerate_calibration_questions", "chunks_from_nodes", "generate_calibration_questions"]


def chunks_from_nodes(items: Iterable[BaseNode | NodeWithScore | CorpusEntry]) -> list[CorpusEntry]:
    """Nodes (or corpus entries / chunks, kept as they are) as chunks with their document.

    A node's document is its ``ref_doc_id`` (the source document), else ``metadata["parent_id"]``,
    else the node itself.

    Examples
    --------
    >>> from llama_index.core.schema import TextNode
    >>> chunks_from_nodes([TextNode(id_="n1", text="Rollo led the Normans.", metadata={"parent_id": "doc"})])
    [Chunk(id='n1', text='Rollo led the Normans.', title=None, parent_id='doc')]
    """
    out: list[CorpusEntry] = []
    for item in items:
        if isinstance(item, CorpusEntry):
            out.append(item)
            continue
        node = item.node if isinstance(item, NodeWithScore) else item
        if not isinstance(node, BaseNode):
            raise ConformalError(f"Expected LlamaIndex nodes or CorpusEntry objects, got {type(item).__name__}.")
        parent = node.ref_doc_id or node.metadata.get("parent_id") or node.node_id
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        out.append(Chunk(node.node_id, text, title=node.metadata.get("title"), parent_id=str(parent)))
    return out


async def agenerate_calibration_questions(
    nodes: Iterable[BaseNode | NodeWithScore | CorpusEntry],
    llm: Any,
    n_questions: int,
    *,
    seed: int = 0,
    topic: str | None = None,
    completion_prompt: PromptTemplate | str | None = None,
    chat_prompt: ChatPromptTemplate | None = None,
    cache: JsonCache | str | Path | bool | None = True,
    max_retries: int = 2,
    max_concurrency: int = 4,
    timeout: float | None = 120.0,
    min_words: int = DEFAULT_MIN_WORDS,
    progress: bool = False,
) -> tuple[list[CalibrationExample], GenerationReport]:
    """Async :func:`generate_calibration_questions`."""
    task = llm_task(llm, QUESTION_PROMPTS, completion_prompt, chat_prompt)
    return await agenerate_questions(
        chunks_from_nodes(nodes),
        task.complete,
        n_questions,
        model=task.model,
        prompt=task.render,
        seed=seed,
        topic=topic,
        temperature=task.temperature,
        max_retries=max_retries,
        max_concurrency=max_concurrency,
        timeout=timeout,
        cache=open_cache(cache),
        min_words=min_words,
        progress=progress,
    )


def generate_calibration_questions(
    nodes: Iterable[BaseNode | NodeWithScore | CorpusEntry],
    llm: Any,
    n_questions: int,
    *,
    seed: int = 0,
    topic: str | None = None,
    completion_prompt: PromptTemplate | str | None = None,
    chat_prompt: ChatPromptTemplate | None = None,
    cache: JsonCache | str | Path | bool | None = True,
    max_retries: int = 2,
    max_concurrency: int = 4,
    timeout: float | None = 120.0,
    min_words: int = DEFAULT_MIN_WORDS,
    progress: bool = False,
) -> tuple[list[CalibrationExample], GenerationReport]:
    """Generate calibration questions from your nodes with your LLM, one per sampled node.

    Nodes are sampled evenly across documents (seeded); each output is parsed, filtered and
    retried up to ``max_retries`` times (see :mod:`conformal_rag_plugins.labelling.question_gen`).
    The examples carry the node id as gold and go to :func:`label_with_judge`, or straight to
    :func:`calibrate_retriever`.

    Parameters
    ----------
    nodes : iterable of BaseNode, NodeWithScore, CorpusEntry or Chunk
        The indexed nodes (their ids are the gold ids).
    llm : LlamaIndex LLM
        A base model gets ``completion_prompt`` via ``acomplete``; a chat model
        (``metadata.is_chat_model``) gets ``chat_prompt`` via ``achat``.
    n_questions : int
    seed : int
    topic : str, optional
        Topic of interest, inserted into the prompt.
    completion_prompt : PromptTemplate or str, optional
        Variables ``{context}``, ``{topic}``, ``{topic_instruction}``; must ask for a
        ``{"question", "answer"}`` JSON object. Default: three worked examples.
    chat_prompt : ChatPromptTemplate, optional
        Same variables.
    cache : JsonCache, path or bool
        ``True`` (default): ``~/.cache/conformal-rag/calibration_llm.sqlite``; ``False``: none.
        A re-run reuses every cached output.
    max_retries, max_concurrency, timeout, min_words, progress
        See :func:`~conformal_rag_plugins.labelling.question_gen.agenerate_questions`.

    Returns
    -------
    examples : list of CalibrationExample
    report : GenerationReport
        ``report.summary()`` gives the counts per rejection reason.

    Examples
    --------
    >>> from llama_index.core.llms import MockLLM
    >>> from llama_index.core.schema import TextNode
    >>> nodes = [TextNode(id_="n1", text="The Normans were led by Rollo, a Viking chief.")]
    >>> examples, report = generate_calibration_questions(nodes, MockLLM(), 1, cache=False)
    >>> report.n_generated, report.rejected  # MockLLM echoes the prompt, so it repeats a worked example
    (0, {'answer_not_in_chunk': 3})
    """
    return run_sync(
        agenerate_calibration_questions(
            nodes,
            llm,
            n_questions,
            seed=seed,
            topic=topic,
            completion_prompt=completion_prompt,
            chat_prompt=chat_prompt,
            cache=cache,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            timeout=timeout,
            min_words=min_words,
            progress=progress,
        )
    )
