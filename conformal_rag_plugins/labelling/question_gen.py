"""Generate calibration questions from the user's own chunks with the user's LLM (CONFLARE step 1).

:func:`stratified_order` orders usable chunks (>= ``min_words`` words) to cover documents evenly
(seeded document shuffle, chunks shuffled within, round-robin); too few usable chunks raises
:class:`~conformal_rag_plugins.core.errors.CalibrationError` naming the achievable number. Each
chunk gets one question, parsed and filtered (:mod:`~conformal_rag_plugins.labelling.question_filters`)
and retried up to ``max_retries`` times; duplicates are removed in sampling order and skipped
chunks replaced by the next ones. Every rejection and skip is counted by reason. With
``QuestionOptions(passage_sentences=k)`` the LLM sees a window of ``k`` consecutive sentences of the
chunk (:func:`passage_window`, seeded by the chunk id and the attempt, so a retry sees another window)
while the checks still read the whole chunk: a small base model writes a usable question from a short
passage far more often than from a long one. LLM outputs are
cached under (model, prompt, attempt, temperature), so a re-run makes no repeated calls. With
``max_concurrency=1`` the LLM is called in the same order on every run, so a seeded local model
writes the same questions again. A call that still fails after its retries is an ``llm_error``
rejection once the LLM has answered some call of the run; before that it raises
:class:`~conformal_rag_plugins.core.errors.LLMUnavailableError` (an unreachable server fails at
once instead of after every chunk).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.errors import CalibrationError, LLMUnavailableError
from ..core.normalize import normalize_answer
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..runtime.kv_cache import JsonCache, is_text_record
from ..runtime.retry import call_with_retries
from .llm import CompleteFn, LLMTask
from .options import DEFAULT_MIN_WORDS, QuestionOptions
from .prompts import QUESTION_FEW_SHOT_TEMPLATE, topic_instruction
from .question_filters import REASON_DUPLICATE, check_generated

_CACHE_NAMESPACE = "question-gen/v1"
logger = logging.getLogger("conformal_rag_plugins")


def document_of(entry: CorpusEntry) -> str:
    """The document a chunk comes from: ``Chunk.parent_id``, else the entry's own id.

    >>> from conformal_rag_plugins.labelling.chunk_records import Chunk
    >>> document_of(Chunk("d::chunk1", "x", parent_id="d")), document_of(CorpusEntry("e", "y"))
    ('d', 'e')
    """
    parent = getattr(entry, "parent_id", None)
    return parent if isinstance(parent, str) and parent else entry.id


def stratified_order(
    chunks: Sequence[CorpusEntry], seed: int = 0, *, min_words: int = DEFAULT_MIN_WORDS
) -> list[CorpusEntry]:
    """Usable chunks (>= ``min_words`` words, unique ids) in a seeded order covering documents round-robin.

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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def passage_window(text: str, sentences: int | None, key: str) -> str:
    """``sentences`` consecutive sentences of ``text`` (white space collapsed), the start seeded by ``key``.

    The whole text when ``sentences`` is ``None`` or the text has no more sentences than that. The same
    ``key`` gives the same window on every run (``random.Random`` seeded with a string is stable).

    >>> text = "Rollo led the Normans. He took Rouen in 911. His son was William. The duchy grew."
    >>> passage_window(text, 2, "chunk1:0")
    'His son was William. The duchy grew.'
    >>> passage_window(text, 2, "chunk1:0") == passage_window(text, 2, "chunk1:0"), passage_window(text, None, "k")
    (True, 'Rollo led the Normans. He took Rouen in 911. His son was William. The duchy grew.')
    """
    flat = " ".join(text.split())
    if sentences is None:
        return flat
    parts = _SENTENCE_END.split(flat)
    if len(parts) <= sentences:
        return flat
    start = random.Random(key).randrange(len(parts) - sentences + 1)
    return " ".join(parts[start : start + sentences])


def _too_small(n: int, usable: int, total: int, min_words: int) -> CalibrationError:
    return CalibrationError(
        f"The corpus is too small for {n} questions: it has {usable} usable chunk(s) (of {total}; chunks need "
        f"at least {min_words} words), and one question is generated per chunk, so at most {usable} question(s) "
        f"can be generated. Ask for n_questions <= {usable}, or add documents."
    )


def sample_chunks(
    chunks: Sequence[CorpusEntry], n: int, seed: int = 0, *, min_words: int = DEFAULT_MIN_WORDS
) -> list[CorpusEntry]:
    """The first ``n`` of :func:`stratified_order`; :class:`CalibrationError` (with the achievable number) if fewer.

    >>> chunks = [CorpusEntry(f"doc{i}", "a passage of six words here") for i in range(3)]
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

    ``n_chunks_tried`` counts sampled chunks plus replacements; ``rejected`` counts every rejected
    attempt by reason; ``skipped`` counts chunks without a question by their last reason (or ``duplicate``).
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

    ``llm`` is an :class:`~conformal_rag_plugins.labelling.llm.LLMTask` or a plain async
    ``complete(prompt)`` (default :data:`~conformal_rag_plugins.labelling.prompts.QUESTION_FEW_SHOT_TEMPLATE`);
    chunk text is passed with white space collapsed. ``options`` prompt fields are not read (the
    task carries its prompt). Examples come back in sampling order with ``answers=(answer,)``,
    ``gold_ids=(chunk id,)`` and metadata ``source_chunk_id``, ``source_document_id``,
    ``generated_by``, ``topic``, ``generation_attempt``.

    Raises
    ------
    LLMUnavailableError
        A call failed after its retries before any call of the run was answered.

    >>> async def fake_llm(prompt):
    ...     return '{"question": "Who led the Normans?", "answer": "Rollo"} Passage: ...'
    >>> chunks = [CorpusEntry("Normans#0", "The Normans were led by Rollo, a Viking chief.")]
    >>> task = LLMTask.plain(fake_llm, QUESTION_FEW_SHOT_TEMPLATE, model="fake")
    >>> examples, report = asyncio.run(agenerate_questions(chunks, task, 1))
    >>> examples[0].question, examples[0].answers, examples[0].gold_ids, report.n_generated, report.llm_calls
    ('Who led the Normans?', ('Rollo',), ('Normans#0',), 1, 1)
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
    window = options.passage_sentences
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise CalibrationError(f"passage_sentences must be a positive whole number or None, got {window!r}.")
    report = GenerationReport(n_questions, len(order), model)
    rejected: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    semaphore = asyncio.Semaphore(options.max_concurrency)
    values_base = {"topic": (topic or "").strip(), "topic_instruction": topic_instruction(topic)}
    answered: list[bool] = []  # non-empty once a call of this run returned
    dead: list[LLMUnavailableError] = []  # the error, once a call failed before any was answered

    async def ask(text: str, attempt: int) -> str | None:
        key = JsonCache.key(_CACHE_NAMESPACE, model, text, attempt, temperature)
        # The cache is read and written under the semaphore: otherwise the threads' finishing order
        # would decide which chunk calls the LLM next, and a seeded local model (whose seed advances
        # with every call) would write other questions on every run. With max_concurrency=1 the call
        # order is fixed. Cache reads and writes may wait on another process's lock: off the event loop.
        async with semaphore:
            if cache is not None and (hit := await asyncio.to_thread(cache.get, key, is_text_record)) is not None:
                report.cache_hits += 1
                return str(hit["text"])
            if dead:  # another call found the LLM down while this one waited for its turn
                raise dead[0]
            report.llm_calls += 1
            try:
                out = await call_with_retries(
                    lambda: task.complete(text), retries=options.call_retries, timeout=options.timeout, raise_last=True
                )
            except Exception as exc:  # any provider error: fatal until the LLM has answered once
                attempts = f"{options.call_retries + 1} attempt" + ("s" if options.call_retries else "")
                if not answered:
                    dead.append(
                        LLMUnavailableError(
                            f"The LLM {model} did not answer (after {attempts}: {exc!r}); check that its server is "
                            "running and its address, key and model name."
                        )
                    )
                    raise dead[0] from exc
                logger.warning("LLM call failed after %s: %r", attempts, exc)
                out = None
            else:
                answered.append(True)
            if out is not None and cache is not None:
                await asyncio.to_thread(cache.put, key, {"text": str(out)})  # a failed write only warns
        return None if out is None else str(out)

    async def one(chunk: CorpusEntry) -> tuple[dict[str, str], int] | None:
        reason = None
        for attempt in range(max_retries + 1):
            passage = passage_window(chunk.text, window, f"{seed}:{chunk.id}:{attempt}")
            text = task.render({"context": passage, **values_base})
            reason, record = check_generated(await ask(text, attempt), chunk.text)
            if reason is None and record is not None:
                return record, attempt
            rejected[str(reason)] += 1
        skipped[str(reason)] += 1
        return None

    from ..runtime.progress import progress_bar

    kept: list[CalibrationExample] = []
    seen: set[str] = set()
    pos = 0
    with progress_bar(total=n_questions, desc="generating questions", unit="q", enabled=options.progress) as bar:
        while len(kept) < n_questions and pos < len(order):
            batch = order[pos : pos + n_questions - len(kept)]
            pos += len(batch)
            tasks = [asyncio.ensure_future(one(c)) for c in batch]
            try:
                results = await asyncio.gather(*tasks)
            except BaseException:  # LLMUnavailableError (or a cancel): stop the calls still in flight
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
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
