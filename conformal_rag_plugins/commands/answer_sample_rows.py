"""Build per-question sample rows (pool + sampled answers) for answer-set evaluation."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..answer_sets.engine import SampleFn
from ..answer_sets.prompts import IDK
from ..datasets.examples import CalibrationExample
from ..retrieval.gold_matching import gold_positions
from ..runtime.run_sync import run_sync


def build_rows(
    questions: Sequence[CalibrationExample],
    fetch: Callable[[str], Any],
    texts: Mapping[str, str],
    sample: SampleFn,
    *,
    pool: int = 10,
    extra_ids: Callable[[CalibrationExample], Sequence[str]] | None = None,
    progress: bool = True,
    top: int | None = None,
) -> list[dict[str, Any]]:
    """For each question: the host's top-``pool`` candidates, and answers sampled from *every* one of them.

    Sampling the whole pool makes set sizes exact (not lower bounds) and chooses chunks without
    looking at the gold; the gold chunk that defines the retrieval score (best-ranked gold in the
    pool, else the first gold chunk) is sampled too, plus ``extra_ids(example)``. ``top`` is the old
    name of ``pool``. Chunk texts come from the pool, else ``texts``. Unanswerable questions get the
    reference ``"I don't know"`` (abstaining is correct); rows carry ``logprobs`` when reported.
    """
    from ..runtime.progress import progress_bar

    size = int(top if top is not None else pool)
    if size < 1:
        raise ValueError(f"pool must be >= 1, got {size}.")
    rows = []
    for ex in progress_bar(questions, desc="sampling", unit="q", enabled=progress):
        got = fetch(ex.question)
        ids = [c for c in got.ids[:size] if c is not None]
        positions = gold_positions(ex, got.ids[:size], got.texts[:size])
        gold_id = got.ids[positions[0]] if positions else (ex.gold_ids[0] if ex.gold_ids else None)
        wanted = [*ids, *([gold_id] if gold_id else []), *(extra_ids(ex) if extra_ids else ())]
        chunk_ids = list(dict.fromkeys(wanted))
        samples, tokens, logprobs = {}, {}, {}
        pool_texts = dict(zip(got.ids, got.texts, strict=True))
        for cid in chunk_ids:
            drawn = run_sync(sample(ex.question, pool_texts[cid] if cid in pool_texts else texts[cid]))
            samples[cid] = [s.text for s in drawn]
            tokens[cid] = [sum(s.prompt_tokens for s in drawn), sum(s.completion_tokens for s in drawn)]
            if any(s.logprob is not None for s in drawn):
                logprobs[cid] = [s.logprob for s in drawn]
        row = {
            "id": ex.id,
            "question": ex.question,
            "answers": list(ex.answers) if not ex.is_impossible else [IDK],
            "is_impossible": ex.is_impossible,
            "gold_ids": list(ex.gold_ids),
            "pool": [{"id": c, "score": float(s)} for c, s in zip(got.ids[:size], got.scores[:size], strict=True)],
            "samples": samples,
            "tokens": tokens,
        }
        if logprobs:
            row["logprobs"] = logprobs
        rows.append(row)
    return rows
