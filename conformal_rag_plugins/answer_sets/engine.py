"""Framework-neutral answer-set construction and generator calibration.

Adapters supply ``sample(question, context) -> awaitable list[Sample]`` from the host
LLM; this module clusters, applies the calibrated combination rule, and reports.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..core.clustering import cluster_answers, merge_clusters
from ..core.errors import CalibrationError, ConformalError, SamplingMismatchError
from ..core.generation_scores import generation_score
from ..datasets.examples import CalibrationExample
from .calibration import AnswerSetCalibration
from .group_rules import OWN_SOURCES, chunk_rules, decide_chunks
from .identity import check_generator
from .options import SamplingOptions
from .prompts import IDK
from .sample_record import Sample

SampleFn = Callable[[str, str], Awaitable[list[Sample]]]


@dataclass(frozen=True)
class ChunkInput:
    """A retrieved chunk: id, text, nonconformity, whether its retriever kept the guarantee (not cut, conformal),
    and the group its retriever served it for (``conformal_group``; ``None`` when ungrouped).
    """

    chunk_id: str
    text: str
    nonconformity: float
    guaranteed: bool = True
    group: str | None = None


def chunks_from_metadata(
    items: Sequence[tuple[str, str, Mapping[str, Any]]], calibration: AnswerSetCalibration
) -> tuple[list[ChunkInput], str]:
    """Turn ``(id, text, metadata)`` of retrieved items into chunk inputs (best first) and why the guarantee is lost.

    Every item must carry a ``ConformalRetriever``'s ``conformal_*`` metadata (re-scoring another
    retriever's item would use another scale). The guarantee is lost by a cut set, a group served a
    fallback threshold, or a retriever calibrated at a smaller threshold than the one the end-to-end
    rule uses for that chunk: the retrieval stage's threshold of the chunk's group
    (``conformal_group``, :func:`~.group_rules.chunk_rules`) when the stage is grouped, else the pooled one.
    """
    family = calibration.retrieval_.score_family_
    parsed = []
    for cid, text, meta in items:
        if "conformal_nonconformity" not in meta:
            raise ConformalError(
                f"Retrieved chunk {cid!r} has no conformal metadata: the answer-set synthesizer needs the nodes of a "
                "ConformalRetriever built with the same calibration (another retriever's scores are on another "
                "scale, so its nodes cannot be re-scored)."
            )
        got_family = meta.get("conformal_score_family", family)
        if got_family != family:
            raise ConformalError(
                f"Chunk {cid!r} was scored with the {got_family!r} family but the calibration uses {family!r}: use "
                "the ConformalRetriever of this calibration."
            )
        group = meta.get("conformal_group")
        parsed.append((cid, text, meta, None if group is None else str(group)))
    needs = chunk_rules(calibration, [g for *_, g in parsed]).thresholds
    reasons = []
    out = []
    for (cid, text, meta, group), need in zip(parsed, needs, strict=True):
        ok = bool(meta.get("conformal_guaranteed", True))
        if not ok:
            reasons.append(retriever_reason(meta, len(items)))
        threshold = meta.get("conformal_threshold")
        if threshold is not None and float(threshold) < need and not math.isclose(float(threshold), need):
            ok = False
            whose = "this calibration's retrieval threshold" if group is None else f"group {group!r}'s threshold"
            reasons.append(
                f"the retriever's threshold {float(threshold):.4g} is below {whose} "
                f"{need:.4g}, so its set may miss chunks the rule keeps"
            )
        out.append(ChunkInput(str(cid), text, float(meta["conformal_nonconformity"]), ok, group))
    out.sort(key=lambda c: c.nonconformity)
    return out, "; ".join(dict.fromkeys(reasons))


def retriever_reason(meta: Mapping[str, Any], returned: int) -> str:
    """Why a retriever marked its set ``conformal_guaranteed=False``, read from its metadata.

    A group served a fallback threshold (too small, or unseen), a ``+inf`` threshold (the retrieval
    stage has no flagged threshold at its level), a set cut below its conformal size (``max_k`` / ``k``),
    or else the retriever's own rule (see its :class:`~conformal_rag_plugins.core.errors.GuaranteeCutWarning`).

    >>> retriever_reason({"conformal_group": "b", "conformal_threshold_source": "keep-all-small-group"}, 3)
    "the retriever served group 'b' a fallback threshold (keep-all-small-group)"
    >>> retriever_reason({"conformal_threshold": float("inf"), "conformal_set_size": 20}, 20)[:38]
    "the retriever's threshold is +inf (its"
    >>> retriever_reason({"conformal_threshold": 0.2, "conformal_set_size": 9}, 5)
    'the retriever cut its conformal set of 9 chunks to 5 (max_k / k)'
    """
    source = meta.get("conformal_threshold_source")
    if source is not None and source not in OWN_SOURCES:
        return f"the retriever served group {meta.get('conformal_group')!r} a fallback threshold ({source})"
    threshold = meta.get("conformal_threshold")
    if isinstance(threshold, int | float) and math.isinf(threshold):
        return (
            "the retriever's threshold is +inf (its retrieval calibration has no flagged threshold at its level), so "
            "its set is the whole pool and a gold chunk outside the pool is not covered"
        )
    size = meta.get("conformal_set_size")
    if isinstance(size, int) and size > returned:
        return f"the retriever cut its conformal set of {size} chunks to {returned} (max_k / k)"
    return "the retriever marked its set not guaranteed (see its GuaranteeCutWarning for why)"


def check_synthesizer_calibration(calibration: Any) -> None:
    """Refuse a calibration without a generator stage (both frameworks' answer-set synthesizers)."""
    if not isinstance(calibration, AnswerSetCalibration):
        raise CalibrationError(
            "ConformalAnswerSetSynthesizer needs an AnswerSetCalibration with a generator stage "
            "(calibrate_answer_sets); a retrieval-only calibration cannot bound answer errors."
        )


def calibrated_samples(calibration: AnswerSetCalibration, n_samples: int | None) -> int:
    """The M a synthesizer samples with: the calibration's, or ``n_samples`` when it is the same.

    >>> from types import SimpleNamespace
    >>> calibrated_samples(SimpleNamespace(n_samples_=5), None)
    5
    """
    m = calibration.n_samples_ if n_samples is None else n_samples
    if m < 1:
        raise ValueError(f"n_samples must be >= 1, got {m}.")
    if m != calibration.n_samples_:
        raise CalibrationError(
            f"n_samples={m} differs from the calibrated M={calibration.n_samples_}; confidences would be on "
            "another scale. Re-calibrate with this n_samples."
        )
    return m


def query_sampling(calibration: AnswerSetCalibration, sampling: SamplingOptions | None) -> SamplingOptions:
    """The sampling options a synthesizer queries with: the calibration's M, and ``sampling``'s other settings.

    A given ``sampling.n_samples`` must equal the calibrated M (another M changes the confidence
    scale), so ``SamplingOptions()`` (M = 10) only fits an M = 10 calibration; another M raises
    :class:`~conformal_rag_plugins.core.errors.SamplingMismatchError` (a ``GeneratorMismatchError``
    naming the field ``sampling.n_samples``, and a ``CalibrationError``).

    >>> from types import SimpleNamespace
    >>> query_sampling(SimpleNamespace(n_samples_=5), None).n_samples
    5
    >>> query_sampling(SimpleNamespace(n_samples_=5), SamplingOptions(n_samples=5, max_concurrency=1)).max_concurrency
    1
    """
    if sampling is None:
        return SamplingOptions(n_samples=calibrated_samples(calibration, None))
    try:
        calibrated_samples(calibration, sampling.n_samples)
    except CalibrationError as error:
        raise SamplingMismatchError(
            f"sampling.{error} Pass SamplingOptions(n_samples={calibration.n_samples_}, ...): the synthesizer "
            "samples with the calibrated M (SamplingOptions() means n_samples=10).",
            ("sampling.n_samples",),
        ) from None
    return sampling


def check_equivalence(calibration: AnswerSetCalibration, equivalence: Any) -> None:
    """Refuse a query-time clustering rule that differs from the calibrated one (it changes the scores)."""
    if equivalence is None:
        return
    calibrated = calibration.clustering_.get("method", "rougeL")
    if equivalence is calibrated or (isinstance(equivalence, str) and equivalence == calibrated):
        return
    name = equivalence if isinstance(equivalence, str) else getattr(equivalence, "__qualname__", repr(equivalence))
    raise CalibrationError(
        f"equivalence={name!r} differs from the calibrated clustering {calibrated!r} "
        f"(tau={calibration.clustering_.get('tau')}): cluster confidences would be on another scale and the "
        "guarantee would be void. Re-calibrate with clustering={'method': ...}, or drop equivalence=."
    )


@dataclass
class AnswerSetResult:
    """The answer set of one question: best-supported ``response`` (or "I don't know"), kept ``answers``."""

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


@dataclass(frozen=True)
class GeneratorStage:
    """How the generator stage is scored: the sampler call, M, the clustering record and the match.

    >>> async def sample(question, context):
    ...     return []
    >>> GeneratorStage(sample, n_samples=4, clustering={"method": "exact"}).match_threshold
    0.3
    """

    sample: SampleFn
    n_samples: int
    clustering: dict[str, Any]
    match_threshold: float = 0.3
    embed: EmbedFn | None = None
    progress: bool = True
    model: str = ""
    generator: dict[str, Any] | None = None


def generator_score(clustering: Mapping[str, Any]) -> str:
    """The cluster confidence a calibration's clustering record asks for (``"frequency"`` if unset)."""
    return str(clustering.get("score", "frequency"))


def cluster_samples(
    samples: Sequence[Sample], clustering: Mapping[str, Any], kwargs: Mapping[str, Any], **extra: Any
) -> list:
    """Cluster one (question, chunk)'s samples with the calibration's method and generator score."""
    return cluster_answers(
        [s.text for s in samples],
        logprobs=[s.logprob for s in samples],
        score=generator_score(clustering),
        **kwargs,
        **extra,
    )


def clustering_kwargs(clustering: dict[str, Any], equivalence: Any = None, embed: EmbedFn | None = None) -> dict:
    """Keyword arguments for :func:`cluster_answers` from a clustering record (``"embedding"`` needs ``embed``)."""
    method = equivalence or clustering.get("method", "rougeL")
    if method == "embedding" and embed is None:
        raise CalibrationError(
            "This calibration clusters answers by embedding cosine: pass the host embedding model "
            "(embed_model=... / embeddings=...; when calibrating, ClusteringOptions(embedder=...))."
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
    cut_reason: str = "",
    generator: Mapping[str, Any] | None = None,
) -> AnswerSetResult:
    """Sample every chunk the rule can keep, cluster, and apply the end-to-end rule.

    A grouped retrieval stage gives each chunk the rule of its group (:func:`~.group_rules.chunk_rules`:
    the query's group, or label-conditional each chunk's own), never the pooled threshold on a group's set.
    ``guaranteed`` only if the rule is (every group's own, no fallback), every chunk's retriever kept its
    set and the generator was checked. ``generator`` is compared with the calibration's before any LLM call (mismatch:
    :class:`~conformal_rag_plugins.core.errors.GeneratorMismatchError`); a missing record on either
    side warns ``UncheckedGeneratorWarning``, sets ``extra["generator_checked"]`` False and makes the
    set not guaranteed, the ``reason`` naming the missing record.
    """
    check_equivalence(calibration, equivalence)
    kwargs = clustering_kwargs(calibration.clustering_, equivalence, embed)
    unchecked = check_generator(calibration.generator_, generator, calibration.clustering_)
    rules = chunk_rules(calibration, [c.group for c in chunks])
    ids = [c.chunk_id for c in chunks]
    nonconf = np.array([c.nonconformity for c in chunks], dtype=float)
    keep = rules.retrieval_mask(nonconf) if chunks else np.zeros(0, dtype=bool)
    todo = [c for c, k in zip(chunks, keep, strict=True) if k]
    sampled = await asyncio.gather(*(sample(question, c.text) for c in todo))
    clusters = {
        c.chunk_id: cluster_samples(
            got, calibration.clustering_, kwargs, n_samples=calibration.n_samples_, chunk_id=c.chunk_id
        )
        for c, got in zip(todo, sampled, strict=True)
    }
    decision = decide_chunks(rules, ids, nonconf, clusters, calibration.rule())
    merged = decision.answer_set(**kwargs)
    sampled_clusters = len(merge_clusters(clusters, **kwargs)) if clusters else 0
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
    reasons = []
    if not decision.guaranteed:
        reasons.append(f"{decision.reason} (generator coverage ceiling {calibration.coverage_ceiling_:.2f})")
    if rules.reason:
        reasons.append(rules.reason)
    if calibration.retrieval_.stale_rule_reason_:
        reasons.append(calibration.retrieval_.stale_rule_reason_)
    if not all(c.guaranteed for c in chunks):
        reasons.append(f"Not every retrieved chunk kept the retrieval guarantee: {cut_reason or 'a chunk was cut'}.")
    if unchecked:
        reasons.append(unchecked)
    guaranteed = not reasons
    reason = " ".join(reasons)
    if not chunks:
        reason = reason or "The retrieval set is empty: abstaining."
    all_samples = [s for got in sampled for s in got]
    return AnswerSetResult(
        question=question,
        response=_best(real).representative if real else IDK,
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
        extra={"sampled_clusters": sampled_clusters, "generator_checked": not unchecked},
    )


def _best(answers: Sequence[Any]) -> Any:
    """The most confident answer; among equal confidences, the most likely (then the first)."""
    return max(answers, key=lambda a: (a.confidence, -math.inf if a.likelihood is None else a.likelihood))


async def acalibrate_generation(
    examples: Sequence[CalibrationExample],
    gold_text: Callable[[CalibrationExample], str | None],
    stage: GeneratorStage,
    *,
    match: str = "rouge1",
    references: Callable[[CalibrationExample], Sequence[str]] | None = None,
) -> list[float]:
    """Generator-stage scores: ``-confidence`` of the cluster matching a reference, ``+inf`` if none (kept).

    An example without reference answers raises.

    >>> import asyncio
    >>> async def sample(question, context):
    ...     return [Sample("Rollo")] * 3
    >>> ex = CalibrationExample("Who?", gold_ids=("a",), answers=("Rollo",))
    >>> stage = GeneratorStage(sample, n_samples=3, clustering={"method": "exact"}, progress=False)
    >>> asyncio.run(acalibrate_generation([ex], lambda e: "Rollo led them.", stage))
    [-1.0]
    """
    from ..runtime.progress import progress_bar

    def refs(ex: CalibrationExample) -> Sequence[str]:
        return references(ex) if references is not None else ex.answers

    unlabeled = [ex.question for ex in examples if not refs(ex)]
    if unlabeled:
        raise CalibrationError(
            f"{len(unlabeled)} example(s) have no reference answers (e.g. {unlabeled[0]!r}); the generator stage "
            "needs them."
        )
    kwargs = clustering_kwargs(stage.clustering, None, stage.embed)
    scores = []
    for ex in progress_bar(examples, desc="sampling answers", unit="q", enabled=stage.progress):
        text = gold_text(ex)
        if text is None:
            raise CalibrationError(f"No text found for the gold chunk(s) {ex.gold_ids} of {ex.question!r}.")
        got = await stage.sample(ex.question, text)
        clusters = cluster_samples(got, stage.clustering, kwargs, n_samples=stage.n_samples)
        scores.append(generation_score(clusters, refs(ex), match=match, threshold=stage.match_threshold))
    return scores


def coverage_report(scores: Sequence[float], alpha_generation: float, *, threshold_finite: bool | None = None) -> str:
    """One line on the generator's coverage ceiling (share of finite scores) and whether the target is reachable.

    Reachable: the generator threshold is finite (HMP: a miss is rejected). A ceiling above the
    target is not enough: the threshold follows the flag rule, so it is finite only when
    :func:`~conformal_rag_plugins.core.quantile.flagged_rank` gives ``n`` scores a rank at
    ``alpha_generation`` and the calibration has at most that rank's ``max_misses`` misses (questions
    without a correct sample). Twelve questions, none missed, are too few at 0.1:

    >>> coverage_report([-1.0] * 9 + [float("inf")], 0.1)
    'coverage ceiling 0.90; target 1-alpha_gen = 0.90 is UNREACHABLE with this LLM and prompt (threshold +inf)'
    >>> coverage_report([-1.0] * 12, 0.1)
    'coverage ceiling 1.00; target 1-alpha_gen = 0.90 is UNREACHABLE with this LLM and prompt (threshold +inf)'
    """
    ceiling = sum(1 for s in scores if math.isfinite(s)) / max(1, len(scores))
    if threshold_finite is None:
        import warnings

        from ..core.errors import InfiniteThresholdWarning
        from ..core.quantile import conformal_quantile

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            threshold_finite = bool(scores) and math.isfinite(conformal_quantile(scores, alpha_generation))
    status = "reachable" if threshold_finite else "UNREACHABLE with this LLM and prompt (threshold +inf)"
    return f"coverage ceiling {ceiling:.2f}; target 1-alpha_gen = {1 - alpha_generation:.2f} is {status}"
