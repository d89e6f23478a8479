"""Label calibration questions with an LLM judge over the host ranking (CONFLARE step 2).

Walk the host ranking from the top; the first chunk holding the answer is the gold chunk: the
question's source chunk (``metadata["source_chunk_id"]``) without a judge call (``"source"``), or
the first chunk the judge says "yes" to (``"judge"``). At most ``budget`` chunks are judged. A
question not resolved within the budget is **kept**, never dropped (dropping hard questions, as
CONFLARE does, biases calibration and breaks the guarantee): its gold is the source chunk
(``"budget-exhausted"``), a conservative label (an unjudged chunk above it may hold the answer).
Without a source chunk it keeps its hand-labelled gold (so ``budget=0`` changes nothing), else
stays unlabelled (``gold_ids=()``, counted in :attr:`LabelReport.n_unlabelled`). A judge output
of ``None`` (neither yes nor no) counts as "no" and is counted.
:class:`~conformal_rag_plugins.labelling.host_judge.HostJudge` (``label_with_judge`` of both adapters) uses it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import CalibrationError, LLMUnavailableError
from ..datasets.examples import CalibrationExample
from ..runtime.kv_cache import JsonCache, is_text_record
from ..runtime.retry import call_with_retries
from ..runtime.run_sync import run_sync
from .llm import LLMTask
from .options import JudgeOptions
from .prompts import JUDGE_FEW_SHOT_TEMPLATE

logger = logging.getLogger("conformal_rag_plugins")

RULE_JUDGE = "judge"
RULE_SOURCE = "source"
RULE_BUDGET = "budget-exhausted"

JudgeFn = Callable[[str, str, str], Awaitable[bool | None]]
Ranking = Sequence[tuple[str | None, str]]
RankFn = Callable[[str], Awaitable[Ranking] | Ranking]

_TOKEN = re.compile(r"[a-z]+")
_CACHE_NAMESPACE = "judge/v1"


def parse_yes_no(text: str | None) -> bool | None:
    """The first ``yes`` or ``no`` word of ``text`` (case-insensitive), or ``None`` when there is none.

    >>> parse_yes_no(" Yes, it does."), parse_yes_no("**No**"), parse_yes_no("The answer is yes")
    (True, False, True)
    >>> parse_yes_no("Not sure") is None
    True
    """
    for token in _TOKEN.findall((text or "").lower()):
        if token == "yes":
            return True
        if token == "no":
            return False
    return None


class LLMJudge:
    """A cached yes/no judge over an async ``complete(prompt) -> str`` LLM call.

    ``prompt`` is a template with ``{question}``, ``{answer}``, ``{context}`` or a render function
    (default :data:`~conformal_rag_plugins.labelling.prompts.JUDGE_FEW_SHOT_TEMPLATE`); ``model`` and
    ``temperature`` are part of the cache key. A call that still fails after ``call_retries``
    returns ``None`` and counts in ``failed_calls``; once ``dead_after`` calls have failed before
    any was answered (a cache hit counts), the judge raises
    :class:`~conformal_rag_plugins.core.errors.LLMUnavailableError` instead (a dead endpoint).

    >>> async def fake(prompt):
    ...     return " yes"
    >>> judge = LLMJudge(fake, model="fake")
    >>> asyncio.run(judge("Who?", "Rollo", "Rollo led them.")), judge.llm_calls
    (True, 1)
    """

    def __init__(
        self,
        complete: Callable[[str], Awaitable[str]],
        *,
        model: str = "unknown",
        prompt: str | Callable[[Mapping[str, str]], str] | None = None,
        temperature: float | None = None,
        cache: JsonCache | None = None,
        timeout: float | None = 60.0,
        call_retries: int = 2,
        dead_after: int | None = 3,
    ) -> None:
        if dead_after is not None and dead_after < 1:
            raise CalibrationError(f"dead_after must be >= 1 or None, got {dead_after!r}.")
        self.complete = complete
        self.dead_after = dead_after
        self.answered = 0
        self.model = model
        self.render = LLMTask.plain(complete, JUDGE_FEW_SHOT_TEMPLATE if prompt is None else prompt).render
        self.temperature = temperature
        self.cache = cache
        self.timeout = timeout
        self.call_retries = call_retries
        self.llm_calls = 0
        self.cache_hits = 0
        self.failed_calls = 0
        self.last_failure = ""
        """The last failed call's error (``repr``), for a caller that reports an LLM that never answered."""

    @classmethod
    def for_task(
        cls, task: LLMTask, *, cache: JsonCache | None = None, options: JudgeOptions | None = None
    ) -> LLMJudge:
        """A judge over an :class:`~conformal_rag_plugins.labelling.llm.LLMTask`, timeout and retries from ``options``.

        >>> async def fake(prompt):
        ...     return "no"
        >>> judge = LLMJudge.for_task(LLMTask.plain(fake, JUDGE_FEW_SHOT_TEMPLATE, model="fake"))
        >>> asyncio.run(judge("Who?", "Rollo", "The Seine flows to the sea.")), judge.model, judge.timeout
        (False, 'fake', 60.0)
        """
        options = options or JudgeOptions()
        return cls(
            task.complete,
            model=task.model,
            prompt=task.render,
            temperature=task.temperature,
            cache=cache,
            timeout=options.timeout,
            call_retries=options.call_retries,
            dead_after=options.dead_after,
        )

    def _stop_if_dead(self) -> None:
        if self.dead_after is not None and not self.answered and self.failed_calls >= self.dead_after:
            reason = f" (last error: {self.last_failure})" if self.last_failure else ""
            raise LLMUnavailableError(
                f"The judge LLM ({self.model}) did not answer: its first {self.failed_calls} calls failed after "
                f"their retries{reason}; check that its server is running and its address, key and model name. "
                "Nothing was labelled."
            )

    async def __call__(self, question: str, answer: str, chunk_text: str) -> bool | None:
        """``True``/``False`` for yes/no, ``None`` for an unparseable output or a failed call."""
        context = " ".join(chunk_text.split())
        text = self.render({"question": question, "answer": answer, "context": context})
        key = JsonCache.key(_CACHE_NAMESPACE, self.model, text, question, answer, chunk_text, self.temperature)
        # cache reads and writes may wait on a lock held by another process: keep them off the event loop
        if self.cache is not None and (hit := await asyncio.to_thread(self.cache.get, key, is_text_record)) is not None:
            self.cache_hits += 1
            self.answered += 1
            return parse_yes_no(hit["text"])
        self.llm_calls += 1
        try:
            out = await call_with_retries(
                lambda: self.complete(text), retries=self.call_retries, timeout=self.timeout, raise_last=True
            )
        except Exception as exc:  # any provider error after the retries: counted (as "no"), remembered
            logger.warning("LLM call failed after %d attempts: %r", self.call_retries + 1, exc)
            self.failed_calls += 1
            self.last_failure = repr(exc)
            self._stop_if_dead()
            return None
        if out is None:
            self.failed_calls += 1
            self._stop_if_dead()
            return None
        self.answered += 1
        if self.cache is not None:
            await asyncio.to_thread(self.cache.put, key, {"text": str(out)})  # a failed write only warns
        return parse_yes_no(str(out))


@dataclass
class LabelReport:
    """How the calibration questions were labelled (counts per ``label_rule``, judge calls, unparseable outputs).

    ``n_unlabelled``: budget-exhausted examples without a source chunk; ``unparseable`` includes
    failed calls; ``llm_calls``/``cache_hits``/``failed_calls`` are 0 for judges other than
    :class:`LLMJudge`, ``last_failure`` the last failed call's error.
    """

    n: int = 0
    by_judge: int = 0
    by_source: int = 0
    budget_exhausted: int = 0
    n_unlabelled: int = 0
    judge_calls: int = 0
    unparseable: int = 0
    budget: int = 5
    llm_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    last_failure: str = ""

    def summary(self) -> str:
        """A few lines for the console.

        >>> print(LabelReport(4, 2, 1, 1, 0, 7, 1, budget=5).summary())
        labelled 4 questions: 2 by the judge, 1 at their source chunk, 1 with the budget exhausted (kept, \
gold = source chunk)
        judge calls: 7 (budget 5 per question), unparseable outputs: 1 (counted as no); LLM calls 0, cache hits 0
        """
        lines = [
            f"labelled {self.n} questions: {self.by_judge} by the judge, {self.by_source} at their source chunk, "
            f"{self.budget_exhausted} with the budget exhausted (kept, gold = source chunk)",
            f"judge calls: {self.judge_calls} (budget {self.budget} per question), unparseable outputs: "
            f"{self.unparseable} (counted as no); LLM calls {self.llm_calls}, cache hits {self.cache_hits}",
        ]
        if self.n_unlabelled:
            lines.append(
                f"WARNING: {self.n_unlabelled} question(s) have no source chunk and no judged gold; label them by "
                "hand or raise the budget (calibrate_retriever refuses unlabelled examples)."
            )
        return "\n".join(lines)


async def _ranking(rank: RankFn, question: str) -> list[tuple[str | None, str]]:
    got = rank(question)
    if inspect.isawaitable(got):
        got = await got
    return [(cid, text) for cid, text in got]


async def alabel_examples(
    examples: Sequence[CalibrationExample],
    rank: RankFn,
    judge: JudgeFn,
    *,
    budget: int = 5,
    max_concurrency: int = 4,
    judge_model: str | None = None,
    progress: bool = False,
) -> tuple[list[CalibrationExample], LabelReport]:
    """Label examples by walking the host ranking with a judge (see the module docstring); none dropped.

    ``rank(question)`` gives ``[(chunk_id, text), ...]`` best first (sync or async); the judge sees
    ``answers[0]``. Metadata gains ``label_rule``, ``gold_rank`` (1-based, ``None`` outside the
    ranking), ``judge_calls``, ``judge_budget`` and ``judge_model``.

    >>> ranking = [("c1", "Vikings raided France."), ("c2", "Rollo led the Normans."), ("src", "...")]
    >>> async def judge(question, answer, text):
    ...     return answer in text
    >>> ex = CalibrationExample("Who led the Normans?", gold_ids=("src",), answers=("Rollo",),
    ...                         metadata={"source_chunk_id": "src"})
    >>> labelled, report = label_examples([ex], lambda q: ranking, judge)
    >>> labelled[0].gold_ids, labelled[0].metadata["label_rule"], labelled[0].metadata["gold_rank"], report.judge_calls
    (('c2',), 'judge', 2, 2)
    """
    if budget < 0:
        raise CalibrationError(f"The judge budget must be >= 0, got {budget}.")
    examples = list(examples)
    semaphore = asyncio.Semaphore(max_concurrency)
    report = LabelReport(n=len(examples), budget=budget)
    calls0, hits0 = getattr(judge, "llm_calls", 0), getattr(judge, "cache_hits", 0)
    failed0 = getattr(judge, "failed_calls", 0)

    from ..runtime.progress import progress_bar

    bar = progress_bar(total=len(examples), desc="labelling", unit="q", enabled=progress)

    async def one(ex: CalibrationExample) -> CalibrationExample:
        source = ex.metadata.get("source_chunk_id")
        answer = ex.answers[0] if ex.answers else ""
        async with semaphore:
            ranking = await _ranking(rank, ex.question)
            judged = 0
            found: tuple[str, str | None, str, int] | None = None  # rule, id, text, position
            for pos, (cid, text) in enumerate(ranking):
                if source is not None and cid == source:
                    found = (RULE_SOURCE, cid, text, pos)
                    break
                if judged >= budget:
                    break
                judged += 1
                verdict = await judge(ex.question, answer, text)
                if verdict is None:
                    report.unparseable += 1
                elif verdict:
                    found = (RULE_JUDGE, cid, text, pos)
                    break
        report.judge_calls += judged
        bar.update(1)
        meta: dict[str, Any] = {"judge_calls": judged, "judge_budget": budget}
        if judge_model is not None:
            meta["judge_model"] = judge_model
        if found is None:
            ids = [cid for cid, _ in ranking]
            report.budget_exhausted += 1
            if source is None:  # keep the gold the question came with (hand labels), if any
                ranks = [ids.index(g) + 1 for g in ex.gold_ids if g in ids]
                meta |= {"label_rule": RULE_BUDGET, "gold_rank": min(ranks) if ranks else None}
                if not ex.gold_ids and not ex.gold_texts:
                    report.n_unlabelled += 1
                return replace(ex, metadata=ex.metadata | meta)
            meta |= {"label_rule": RULE_BUDGET, "gold_rank": ids.index(source) + 1 if source in ids else None}
            return replace(ex, gold_ids=(source,), gold_texts=(), metadata=ex.metadata | meta)
        rule, cid, text, pos = found
        meta |= {"label_rule": rule, "gold_rank": pos + 1}
        if rule == RULE_SOURCE:
            report.by_source += 1
        else:
            report.by_judge += 1
        if cid is None:  # a host document without an id: match it by text
            return replace(ex, gold_ids=(), gold_texts=(text,), metadata=ex.metadata | meta)
        return replace(ex, gold_ids=(cid,), gold_texts=(), metadata=ex.metadata | meta)

    tasks = [asyncio.ensure_future(one(ex)) for ex in examples]
    try:
        out = list(await asyncio.gather(*tasks))
    except BaseException:  # e.g. a dead judge: stop the other questions' walks, then raise
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        bar.close()
    report.llm_calls = getattr(judge, "llm_calls", 0) - calls0
    report.cache_hits = getattr(judge, "cache_hits", 0) - hits0
    report.failed_calls = getattr(judge, "failed_calls", 0) - failed0
    report.last_failure = str(getattr(judge, "last_failure", ""))
    return out, report


def label_examples(
    examples: Sequence[CalibrationExample],
    rank: RankFn,
    judge: JudgeFn,
    *,
    budget: int = 5,
    max_concurrency: int = 4,
    judge_model: str | None = None,
    progress: bool = False,
) -> tuple[list[CalibrationExample], LabelReport]:
    """Synchronous :func:`alabel_examples` (runs its own event loop)."""
    return run_sync(
        alabel_examples(
            examples,
            rank,
            judge,
            budget=budget,
            max_concurrency=max_concurrency,
            judge_model=judge_model,
            progress=progress,
        )
    )
