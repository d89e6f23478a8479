"""Generate calibration questions from the user's own chunks with the user's LLM (CONFLARE step 1).

Framework-neutral: the LLM is an :class:`~conformal_rag_plugins.labelling.llm.LLMTask`
(render a prompt from values, complete it asynchronously, a model id), or a plain async
``complete(prompt: str) -> str`` callable with the default template. The LlamaIndex and
LangChain adapters build the task from the host LLM and the host's prompt templates, and
:class:`~conformal_rag_plugins.labelling.question_writer.QuestionWriter` is their public
``generate_calibration_questions``.

How it works
------------
1. :func:`stratified_order` orders the usable chunks (at least ``min_words`` words) so that
   documents are covered evenly: documents in a seeded shuffled order, chunks shuffled
   within each document, then round-robin (every document gives one chunk before any gives
   a second). :func:`sample_chunks` is the first ``n`` of that order. A corpus with fewer
   usable chunks than requested questions raises :class:`~conformal_rag_plugins.core.errors.CalibrationError`
   naming the achievable number (one question per chunk).
2. Each sampled chunk gets one question: the output is parsed and filtered
   (:mod:`~conformal_rag_plugins.labelling.question_filters`); a rejected output is retried
   up to ``max_retries`` times, then the chunk is skipped. Every rejected output and every
   skipped chunk is counted by reason in the :class:`GenerationReport`.
3. Duplicates (same normalised question) are removed in sampling order after each batch;
   skipped chunks are replaced by the next chunks of the order until ``n_questions`` questions
   are kept or the corpus is exhausted.

Every LLM output is cached in a :class:`~conformal_rag_plugins.runtime.kv_cache.JsonCache`
under (model id, prompt text, attempt index, temperature), so an interrupted run resumes
without repeating LLM calls, and a re-run with the same settings makes none.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.errors import CalibrationError
from ..core.normalize import normalize_answer
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..runtime.kv_cache import JsonCache
from ..runtime.retry import call_with_retries
from .llm import CompleteFn, LLMTask
from .options import DEFAULT_MIN_WORDS, QuestionOptions
from .prompts import QUESTION_FEW_SHOT_TEMPLATE, topic_instruction
from .question_filters import REASON_DUPLICATE, check_generated

_CACHE_NAMESPACE = "question-gen/v1"


def document_of(entry: CorpusEntry) -> str:
    """The document a chunk comes from: ``Chunk.parent_id``, else the entry's own id.

    Examples
    --------
    >>> from conformal_rag_plugins.labelling.chunk_records import Chunk
    >>> document_of(Chunk("d::chunk1", "x", parent_id="d")), document_of(CorpusEntry("e", "y"))
    ('d', 'e')
    """
    parent = getattr(entry, "parent_id", None)
    return parent if isinstance(parent, str) and parent else entry.id


def stratified_order(
    chunks: Sequence[CorpusEntry], seed: int = 0, *, min_words: int = DEFAULT_MIN_WORDS
) -> list[CorpusEntry]:
    """Usable chunks in a seeded order that covers documents evenly (round-robin).

    Parameters
    ----------
    chunks : sequence of CorpusEntry or Chunk
        Chunk ids must be unique.
    seed : int
    min_words : int
        Chunks with fewer whitespace-separated words are left out.

    Examples
    --------
    >>> from conformal_rag_plugins.labelling.chunk_records import Chunk
    >>> chunks = [Chunk(f"{d}::chunk{i}", "one two three four five", parent_id=d) for d in "ab" for i in range(2)]
    >>> [document_of(c) for c in stratified_order(chunks, seed=0)]
    ['a', 'b', 'a', 'b']
    """
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise CalibrationError(f"Chunk ids must be unique; {dup!r} occurs more than once.")
    groups: dict[str, list[CorpusEntry]] = {}
    for c in chunks:
        if len(c.text.split()) >= min_words:
            groups.setdefault(document_of(c), []).append(c)
    rng = random.Random(seed)
    docs = list(groups)
    rng.shuffle(docs)
    for d in docs:
        rng.shuffle(groups[d])
    order: list[CorpusEntry] = []
    for depth in range(max((len(g) for g in groups.values()), default=0)):
        order.extend(groups[d][depth] for d in docs if depth < len(groups[d]))
    return order


def _too_small(n: int, usable: int, total: int, min_words: int) -> CalibrationError:
    return CalibrationError(
        f"The corpus is too small for {n} questions: it has {usable} usable chunk(s) (of {total}; chunks need "
        f"at least {min_words} words), and one question is generated per chunk, so at most {usable} question(s) "
        f"can be generated. Ask for n_questions <= {usable}, or add documents."
    )


def sample_chunks(
    chunks: Sequence[CorpusEntry], n: int, seed: int = 0, *, min_words: int = DEFAULT_MIN_WORDS
) -> list[CorpusEntry]:
    """A seeded sample of ``n`` chunks, stratified by document (first ``n`` of :func:`stratified_order`).

    Raises
    ------
    CalibrationError
        When fewer than ``n`` chunks are usable; the message states the achievable number.

    Examples
    --------
    >>> chunks = [CorpusEntry(f"doc{i}", "a passage of six words here") for i in range(3)]
    >>> len(sample_chunks(chunks, 2, seed=1))
    2
    >>> sample_chunks(chunks, 5)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.CalibrationError: The corpus is too small for 5 questions: it has 3 usable ...
    """
    if n < 1:
        raise CalibrationError(f"The number of questions must be positive, got {n}.")
    order = stratified_order(chunks, seed, min_words=min_words)
    if len(order) < n:
        raise _too_small(n, len(order), len(chunks), min_words)
    return order[:n]


@dataclass
class GenerationReport:
    """What happened while generating questions.

    Attributes
    ----------
    n_requested : int
    n_usable_chunks : int
        Chunks long enough to be sampled.
    n_chunks_tried : int
        Chunks an LLM was asked about (sampled ones plus replacements for skipped ones).
    n_generated : int
        Questions kept.
    llm_calls, cache_hits : int
        LLM calls made, and outputs reused from the cache.
    rejected : dict
        Rejected outputs by reason (every attempt counts).
    skipped : dict
        Chunks that gave no question, by the reason of their last attempt (or ``duplicate``).
    model : str
    """

    n_requested: int
    n_usable_chunks: int
    model: str = "unknown"
    n_chunks_tried: int = 0
    n_generated: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """A few lines for the console.

        Examples
        --------
        >>> r = GenerationReport(3, 10, "m", n_chunks_tried=4, n_generated=3, llm_calls=6, rejected={"not_json": 3})
        >>> print(r.summary())
        generated 3 of 3 requested questions from 4 chunks (10 usable), model m
        LLM calls: 6 (plus 0 outputs reused from the cache)
        rejected outputs: not_json 3
        chunks skipped: none
        """

        def fmt(counts: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"

        lines = [
            f"generated {self.n_generated} of {self.n_requested} requested questions from "
            f"{self.n_chunks_tried} chunks ({self.n_usable_chunks} usable), model {self.model}",
            f"LLM calls: {self.llm_calls} (plus {self.cache_hits} outputs reused from the cache)",
            f"rejected outputs: {fmt(self.rejected)}",
            f"chunks skipped: {fmt(self.skipped)}",
        ]
        if self.n_generated < self.n_requested:
            lines.append(
                f"WARNING: only {self.n_generated} questions; the corpus ran out of chunks that gave valid questions."
            )
        return "\n".join(lines)


async def agenerate_questions(
    chunks: Sequence[CorpusEntry],
    llm: LLMTask | CompleteFn,
    n_questions: int,
    *,
    seed: int = 0,
    topic: str | None = None,
    cache: JsonCache | None = None,
    options: QuestionOptions | None = None,
) -> tuple[list[CalibrationExample], GenerationReport]:
    """Generate up to ``n_questions`` calibration questions, one per sampled chunk.

    Parameters
    ----------
    chunks : sequence of CorpusEntry or Chunk
        The indexed chunks (ids as in the host store). ``Chunk.parent_id`` names the document.
    llm : LLMTask or async callable
        The LLM as an :class:`~conformal_rag_plugins.labelling.llm.LLMTask` (a framework
        adapter's ``llm_task``, or ``LLMTask.plain(complete, template, model=...)``), or a
        plain async ``complete(prompt) -> str`` with the default
        :data:`~conformal_rag_plugins.labelling.prompts.QUESTION_FEW_SHOT_TEMPLATE`. Its
        ``model`` is recorded in ``metadata["generated_by"]``; ``model`` and ``temperature``
        are part of the cache key. The chunk text is passed with its white space collapsed.
    n_questions : int
    seed : int
        Seeds the chunk sample.
    topic : str, optional
        A topic of interest, inserted into the prompt.
    cache : JsonCache, optional
    options : QuestionOptions, optional
        Retries, concurrency, timeout, minimum chunk length, progress bar
        (:class:`~conformal_rag_plugins.labelling.options.QuestionOptions`; its prompt fields
        are not read here: the task carries its prompt).

    Returns
    -------
    examples : list of CalibrationExample
        In sampling order: ``answers=(answer,)``, ``gold_ids=(chunk id,)``, metadata
        ``source_chunk_id``, ``source_document_id``, ``generated_by``, ``topic``, ``generation_attempt``.
    report : GenerationReport

    Examples
    --------
    >>> async def fake_llm(prompt):
    ...     return '{"question": "Who led the Normans?", "answer": "Rollo"} Passage: ...'
    >>> chunks = [CorpusEntry("Normans#0", "The Normans were led by Rollo, a Viking chief.")]
    >>> task = LLMTask.plain(fake_llm, QUESTION_FEW_SHOT_TEMPLATE, model="fake")
    >>> examples, report = asyncio.run(agenerate_questions(chunks, task, 1))
    >>> examples[0].question, examples[0].answers, examples[0].gold_ids
    ('Who led the Normans?', ('Rollo',), ('Normans#0',))
    >>> report.n_generated, report.llm_calls
    (1, 1)
    """
    options = options or QuestionOptions()
    task = llm if isinstance(llm, LLMTask) else LLMTask.plain(llm, QUESTION_FEW_SHOT_TEMPLATE)
    model, temperature, min_words, max_retries = task.model, task.temperature, options.min_words, options.max_retries
    order = stratified_order(chunks, seed, min_words=min_words)
    if n_questions < 1:
        raise CalibrationError(f"The number of questions must be positive, got {n_questions}.")
    if len(order) < n_questions:
        raise _too_small(n_questions, len(order), len(chunks), min_words)
    if max_retries < 0:
        raise CalibrationError(f"max_retries must be >= 0, got {max_retries}.")
    report = GenerationReport(n_questions, len(order), model)
    rejected: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    semaphore = asyncio.Semaphore(options.max_concurrency)
    values_base = {"topic": (topic or "").strip(), "topic_instruction": topic_instruction(topic)}

    async def ask(text: str, attempt: int) -> str | None:
        key = JsonCache.key(_CACHE_NAMESPACE, model, text, attempt, temperature)
        # cache reads and writes may wait on a lock held by another process: keep them off the event loop
        if cache is not None and (hit := await asyncio.to_thread(cache.get, key)) is not None:
            report.cache_hits += 1
            return str(hit["text"])
        async with semaphore:
            report.llm_calls += 1
            out = await call_with_retries(
                lambda: task.complete(text), retries=options.call_retries, timeout=options.timeout
            )
        if out is not None and cache is not None:
            await asyncio.to_thread(cache.put, key, {"text": str(out)})  # a failed write only warns
        return None if out is None else str(out)

    async def one(chunk: CorpusEntry) -> tuple[dict[str, str], int] | None:
        text = task.render({"context": " ".join(chunk.text.split()), **values_base})
        reason = None
        for attempt in range(max_retries + 1):
            reason, record = check_generated(await ask(text, attempt), chunk.text)
            if reason is None and record is not None:
                return record, attempt
            rejected[str(reason)] += 1
        skipped[str(reason)] += 1
        return None

    from tqdm.auto import tqdm

    kept: list[CalibrationExample] = []
    seen: set[str] = set()
    pos = 0
    with tqdm(total=n_questions, desc="generating questions", unit="q", disable=not options.progress) as bar:
        while len(kept) < n_questions and pos < len(order):
            batch = order[pos : pos + n_questions - len(kept)]
            pos += len(batch)
            results = await asyncio.gather(*(one(c) for c in batch))
            for chunk, result in zip(batch, results, strict=True):
                if result is None:
                    continue
                record, attempt = result
                norm = normalize_answer(record["question"])
                if norm in seen:
                    rejected[REASON_DUPLICATE] += 1
                    skipped[REASON_DUPLICATE] += 1
                    continue
                seen.add(norm)
                kept.append(
                    CalibrationExample(
                        question=record["question"],
                        gold_ids=(chunk.id,),
                        answers=(record["answer"],),
                        id=f"gen:{chunk.id}",
                        metadata={
                            "source_chunk_id": chunk.id,
                            "source_document_id": document_of(chunk),
                            "generated_by": model,
                            "topic": topic,
                            "generation_attempt": attempt,
                        },
                    )
                )
                bar.update(1)
    report.n_chunks_tried = pos
    report.n_generated = len(kept)
    report.rejected = dict(rejected)
    report.skipped = dict(skipped)
    return kept, report
