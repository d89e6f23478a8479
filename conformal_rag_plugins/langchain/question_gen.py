"""Generate calibration questions from LangChain documents with a LangChain model (CONFLARE step 1).

Thin adapter over :mod:`conformal_rag_plugins.labelling.question_gen`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..labelling.chunk_records import Chunk
from ..labelling.prompts import QUESTION_PROMPTS
from ..labelling.question_gen import DEFAULT_MIN_WORDS, GenerationReport, agenerate_questions
from ..runtime.kv_cache import JsonCache, open_cache
from ..runtime.run_sync import run_sync
from .host import doc_id
from .llm_calls import llm_task

__all__ = ["agenerate_calibration_questions", "chunks_from_documents", "generate_calibration_questions"]


def chunks_from_documents(items: Iterable[Document | CorpusEntry]) -> list[CorpusEntry]:
    """Documents (or corpus entries / chunks, kept as they are) as chunks with their parent document.

    The id is ``Document.id`` (or ``metadata["id"]``), as in the vector store; the parent
    document is ``metadata["parent_id"]``, else ``metadata["source"]``, else the document itself.

    Examples
    --------
    >>> chunks_from_documents([Document("Rollo led the Normans.", id="d1", metadata={"source": "normans.txt"})])
    [Chunk(id='d1', text='Rollo led the Normans.', title=None, parent_id='normans.txt')]
    """
    out: list[CorpusEntry] = []
    for item in items:
        if isinstance(item, CorpusEntry):
            out.append(item)
            continue
        if not isinstance(item, Document):
            raise ConformalError(f"Expected LangChain Documents or CorpusEntry objects, got {type(item).__name__}.")
        cid = doc_id(item)
        if not cid:
            raise ConformalError(
                "A Document has no id; the gold labels need the ids the vector store uses (set Document.id)."
            )
        parent = item.metadata.get("parent_id") or item.metadata.get("source") or cid
        out.append(Chunk(str(cid), item.page_content, title=item.metadata.get("title"), parent_id=str(parent)))
    return out


async def agenerate_calibration_questions(
    documents: Iterable[Document | CorpusEntry],
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
        chunks_from_documents(documents),
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
    documents: Iterable[Document | CorpusEntry],
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
    """Generate calibration questions from your documents with your model, one per sampled document.

    Documents are sampled evenly across parent documents (seeded); each output is parsed,
    filtered and retried up to ``max_retries`` times (see
    :mod:`conformal_rag_plugins.labelling.question_gen`). The examples carry the document
    id as gold and go to :func:`label_with_judge`, or straight to :func:`calibrate_retriever`.

    Parameters
    ----------
    documents : iterable of Document, CorpusEntry or Chunk
        The indexed chunks, with the ids the vector store uses.
    llm : BaseLLM or BaseChatModel
        A completion model gets ``completion_prompt`` via ``ainvoke(str)``; a chat model gets
        ``chat_prompt`` via ``ainvoke(messages)``.
    n_questions : int
    seed : int
    topic : str, optional
        Topic of interest, inserted into the prompt.
    completion_prompt : PromptTemplate or str, optional
        f-string variables ``{context}``, ``{topic}``, ``{topic_instruction}`` (double literal braces);
        must ask for a ``{"question": ..., "answer": ...}`` JSON object. Default: three worked examples.
    chat_prompt : ChatPromptTemplate, optional
        Same variables.
    cache : JsonCache, path or bool
        ``True`` (default): ``~/.cache/conformal-rag/calibration_llm.sqlite``; ``False``: none.
    max_retries, max_concurrency, timeout, min_words, progress
        See :func:`~conformal_rag_plugins.labelling.question_gen.agenerate_questions`.

    Returns
    -------
    examples : list of CalibrationExample
    report : GenerationReport

    Examples
    --------
    >>> from langchain_core.language_models import FakeListLLM
    >>> llm = FakeListLLM(responses=['{"question": "Who led the Normans?", "answer": "Rollo"}'])
    >>> docs = [Document("The Normans were led by Rollo, a Viking chief.", id="d1")]
    >>> examples, report = generate_calibration_questions(docs, llm, 1, cache=False)
    >>> examples[0].question, examples[0].gold_ids
    ('Who led the Normans?', ('d1',))
    """
    return run_sync(
        agenerate_calibration_questions(
            documents,
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
