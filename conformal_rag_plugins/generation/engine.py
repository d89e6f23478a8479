"""Framework-neutral answer-set construction and generator calibration.

Adapters supply ``sample(question, context) -> awaitable list[Sample]`` from the host
LLM; this module clusters, applies the calibrated combination rule, and reports.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..calibration.answer_sets import AnswerSetCalibration
from ..calibration.examples import CalibrationExample
from ..core.clustering import cluster_answers
from ..core.combination import decide_end_to_end
from ..core.errors import CalibrationError
from ..core.generation_scores import generation_score
from .prompts import IDK
from .samples import Sample

__all__ = ["AnswerSetResult", "ChunkInput", "SampleFn", "abuild_answer_set", "acalibrate_generation", "coverage_report"]

SampleFn = Callable[[str, str], Awaitable[list[Sample]]]


@dataclass(frozen=True)
class ChunkInput:
    """A retrieved chunk: id, text and its retrieval nonconformity (``conformal_nonconformity``)."""

    chunk_id: str
    text: str
    nonconformity: float


@dataclass
class AnswerSetResult:
    """The answer set of one question.

    ``response`` is the best-supported answer, or "I don't know" when the set abstains.
    ``answers`` lists every kept answer with its confidence and supporting chunk ids.
    """

    question: str
    response: str
    answers: list[dict[str, Any]]
    abstained: bool
    guaranteed: bool
    alpha: float
    method: str
    retrieval_set: list[str]
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (also the LlamaIndex ``Response.metadata``)."""
        return asdict(self)


EmbedFn = Callable[[list[str]], Any]


def clustering_kwargs(clustering: dict[str, Any], equivalence: Any = None, embed: EmbedFn | None = None) -> dict:
    """Keyword arguments for :func:`cluster_answers` from a calibration's clustering record.

    ``method="embedding"`` needs ``embed`` (the host embedding model's batch call).
    """
    method = equivalence or clustering.get("method", "rougeL")
    if method == "embedding" and embed is None:
        raise CalibrationError(
            "This calibration clusters answers by embedding cosine: pass the host embedding model "
            "(embed_model=... / embeddings=...)."
        )
    out: dict[str, Any] = {"method": method, "tau": clustering.get("tau")}
    if embed is not None:
        out["embed"] = lambda texts: np.asarray(embed(list(texts)), dtype=float)
    return out


async def abuild_answer_set(
    calibration: AnswerSetCalibration,
    question: str,
    chunks: Sequence[ChunkInput],
    sample: SampleFn,
    *,
    equivalence: Any = None,
    embed: EmbedFn | None = None,
) -> AnswerSetResult:
    """Sample every chunk the rule can keep, cluster, and apply the end-to-end rule."""
    rule = calibration.rule()
    ids = [c.chunk_id for c in chunks]
    nonconf = np.array([c.nonconformity for c in chunks], dtype=float)
    keep = rule.retrieval_mask(nonconf) if chunks else np.zeros(0, dtype=bool)
    todo = [c for c, k in zip(chunks, keep, strict=True) if k]
    sampled = await asyncio.gather(*(sample(question, c.text) for c in todo))
    kwargs = clustering_kwargs(calibration.clustering_, equivalence, embed)
    clusters = {
        c.chunk_id: cluster_answers(
            [s.text for s in got], n_samples=calibration.n_samples_, chunk_id=c.chunk_id, **kwargs
        )
        for c, got in zip(todo, sampled, strict=True)
    }
    decision = decide_end_to_end(rule, ids, nonconf, clusters)
    merged = decision.answer_set(**kwargs)
    answers = [
        {
            "text": a.representative,
            "confidence": a.confidence,
            "chunk_ids": list(a.chunk_ids),
            "abstention": a.abstention,
        }
        for a in merged
    ]
    real = [a for a in merged if not a.abstention]
    reason = ""
    guaranteed = calibration.guaranteed_
    if not guaranteed:
        reason = (
            f"A stage threshold is +inf (generator coverage ceiling {calibration.coverage_ceiling_:.2f}): the set "
            "holds every sampled answer but cannot guarantee coverage at this alpha with this LLM."
        )
    if not chunks:
        reason = reason or "The retrieval set is empty: abstaining."
    all_samples = [s for got in sampled for s in got]
    return AnswerSetResult(
        question=question,
        response=real[0].representative if real else IDK,
        answers=answers,
        abstained=not real,
        guaranteed=guaranteed,
        alpha=calibration.alpha_,
        method=decision.method,
        retrieval_set=list(decision.retrieval_set),
        llm_calls=len(all_samples),
        prompt_tokens=sum(s.prompt_tokens for s in all_samples),
        completion_tokens=sum(s.completion_tokens for s in all_samples),
        reason=reason,
    )


async def acalibrate_generation(
    examples: Sequence[CalibrationExample],
    gold_text: Callable[[CalibrationExample], str | None],
    sample: SampleFn,
    *,
    n_samples: int,
    clustering: dict[str, Any],
    match: str = "rouge1",
    match_threshold: float = 0.3,
    progress: bool = True,
    embed: EmbedFn | None = None,
) -> list[float]:
    """Generator-stage scores: ``-confidence`` of the cluster matching a reference, ``+inf`` if none.

    Misses are kept. Examples without reference answers cannot be scored and raise.
    """
    from tqdm.auto import tqdm

    unlabeled = [ex.question for ex in examples if not ex.answers]
    if unlabeled:
        raise CalibrationError(
            f"{len(unlabeled)} example(s) have no reference answers (e.g. {unlabeled[0]!r}); the generator stage "
            "needs them. Drop unanswerable questions from the generator calibration."
        )
    scores = []
    for ex in tqdm(examples, desc="sampling answers", unit="q", disable=not progress):
        text = gold_text(ex)
        if text is None:
            raise CalibrationError(f"No text found for the gold chunk(s) {ex.gold_ids} of {ex.question!r}.")
        got = await sample(ex.question, text)
        clusters = cluster_answers(
            [s.text for s in got], n_samples=n_samples, **clustering_kwargs(clustering, None, embed)
        )
        scores.append(generation_score(clusters, ex.answers, match=match, threshold=match_threshold))
    return scores


def coverage_report(scores: Sequence[float], alpha_generation: float) -> str:
    """One line on the coverage ceiling (share of finite generator scores)."""
    ceiling = sum(1 for s in scores if math.isfinite(s)) / max(1, len(scores))
    status = "reachable" if ceiling >= 1 - alpha_generation else "UNREACHABLE with this LLM and prompt"
    return f"coverage ceiling {ceiling:.2f}; target 1-alpha_gen = {1 - alpha_generation:.2f} is {status}"
