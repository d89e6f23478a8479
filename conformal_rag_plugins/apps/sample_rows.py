"""Build per-question sample rows (pool + sampled answers) for answer-set evaluation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..calibration.examples import CalibrationExample
from ..generation.engine import SampleFn
from ..generation.prompts import IDK

__all__ = ["build_rows"]


def build_rows(
    questions: Sequence[CalibrationExample],
    fetch: Callable[[str], Any],
    texts: Mapping[str, str],
    sample: SampleFn,
    *,
    top: int = 2,
    pool: int = 10,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """For each question: the host pool, and answers sampled from the top chunks and the gold chunk.

    ``fetch(question) -> CandidatePool``; chunk texts come from the pool, and from ``texts``
    for gold chunks outside it. Unanswerable questions get the reference
    ``"I don't know"``, so an abstaining answer counts as correct for them.
    """
    from tqdm.auto import tqdm

    rows = []
    for ex in tqdm(questions, desc="sampling", unit="q", disable=not progress):
        got = fetch(ex.question)
        chunk_ids = list(dict.fromkeys([*(c for c in got.ids[:top] if c is not None), *ex.gold_ids]))
        samples, tokens = {}, {}
        pool_texts = dict(zip(got.ids, got.texts, strict=True))
        for cid in chunk_ids:
            drawn = asyncio.run(sample(ex.question, pool_texts[cid] if cid in pool_texts else texts[cid]))
            samples[cid] = [s.text for s in drawn]
            tokens[cid] = [sum(s.prompt_tokens for s in drawn), sum(s.completion_tokens for s in drawn)]
        rows.append(
            {
                "id": ex.id,
                "question": ex.question,
                "answers": list(ex.answers) if not ex.is_impossible else [IDK],
                "is_impossible": ex.is_impossible,
                "gold_ids": list(ex.gold_ids),
                "pool": [{"id": c, "score": float(s)} for c, s in zip(got.ids[:pool], got.scores[:pool], strict=True)],
                "samples": samples,
                "tokens": tokens,
            }
        )
    return rows
