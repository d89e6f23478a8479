"""``conformal-rag evaluate --answers``: end-to-end answer-set evaluation on corpus/qa JSONL."""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..answer_sets.engine import SampleFn
from ..answer_sets.options import PilotOptions, SplitOptions
from ..answer_sets.pilot import PilotEstimate, draw_pilot, judge_pilot, pilot_size
from ..answer_sets.reach import reach_line
from ..answer_sets.sample_cache import SampleCache
from ..core.clustering import cluster_answers
from ..core.errors import ConformalError, CoverageCeilingWarning, InputFileError
from ..core.generation_scores import generation_score
from ..core.validation import check_alpha
from ..datasets.examples import load_corpus, split_examples
from ..evaluation.answer_set_trials import HELD_OUT_SUFFIX, METHODS, evaluate_abstention, evaluate_methods, prepare_rows
from ..local.encoder import default_cache_dir
from ..retrieval.gold_matching import gold_positions
from ..runtime.atomic import atomic_write_text
from ..runtime.run_sync import run_sync
from .answer_sample_rows import build_rows
from .chunk_corpus import chunk_corpus
from .hosts import build_host
from .input_checks import (
    announce_questions,
    check_at_least,
    check_gold_in_corpus,
    check_outputs,
    check_trials,
    read_questions,
)
from .levels import with_confidence_levels
from .llm_answered import AnsweredSamples


def _llm(kind: str, logprobs: bool = False) -> Any:
    from ..local.llamaindex_models import default_llm, local_llm
    from ..runtime.openai_settings import openai_settings

    if kind == "openai":
        if openai_settings() is None:
            raise ConformalError("--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server).")
        llm = default_llm(temperature=1.0)
        if logprobs:
            llm.logprobs = True  # OpenAI(-like): report token logprobs
        return llm
    return local_llm(temperature=1.0, logprobs=logprobs)


@dataclass(frozen=True)
class EvaluateAnswersRequest:
    """The options of ``conformal-rag evaluate --answers`` (see :func:`run_evaluate_answers`).

    Examples
    --------
    >>> EvaluateAnswersRequest(["corpus.jsonl"], "qa.jsonl", [0.1]).samples
    6
    """

    corpus: Sequence[str | Path]
    qa: str | Path
    alphas: Sequence[float]
    llm: str = "local"
    samples: int = 6
    max_questions: int = 100
    answer_pool: int = 10
    generator_score: str = "frequency"
    trials: int = 20
    seed: int = 0
    json_out: str | Path | None = None
    progress: bool = True
    chunking: bool = True
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    pilot: int = 5


CLI_ADVICE = (
    "Pass a lower --confidence-level (a larger --alpha), a stronger --llm or more --samples; or skip this check "
    "with --no-pilot."
)


def _pilot_ceiling(
    questions: Sequence[Any],
    fetch: Any,
    texts: dict[str, str],
    sample: SampleFn,
    *,
    pool: int,
    n_samples: int,
    generator_score: str,
) -> list[float]:
    """Each pilot question's generator score on its defining gold chunk, as :func:`prepare_rows` computes it.

    Only the gold chunk is sampled (one sampling call per question instead of ``pool``): the
    ceiling needs nothing else.
    """
    scores = []
    for ex in questions:
        got = fetch(ex.question)
        positions = gold_positions(ex, got.ids[:pool], got.texts[:pool])
        gold_id = got.ids[positions[0]] if positions else ex.gold_ids[0]
        text = dict(zip(got.ids, got.texts, strict=True)).get(gold_id) or texts[gold_id]
        drawn = run_sync(sample(ex.question, text))
        clusters = cluster_answers(
            [s.text for s in drawn],
            method="rougeL",
            tau=0.7,
            n_samples=n_samples,
            logprobs=[s.logprob for s in drawn],
            score=generator_score,
        )
        scores.append(generation_score(clusters, list(ex.answers)))
    return scores


def lenient_split(methods: Sequence[str], n_questions: int) -> tuple[SplitOptions, int]:
    """The evaluated method that asks least of the generator, as a split, and its calibration size.

    In that order: Bayesian optimisation with held-out miss bounds, Bayesian optimisation (both
    calibrate on a quarter of the questions: half of the calibration half), HMP, the equal split
    (half of the questions).

    >>> split, n = lenient_split(("bonferroni", "hmp"), 100)
    >>> split.method, n
    ('hmp', 50)
    """
    half = n_questions // 2
    if any(m.endswith(HELD_OUT_SUFFIX) for m in methods):
        return SplitOptions(optimise=True, generator_miss_bound="held-out"), half - half // 2
    if any("-bo" in m for m in methods):
        return SplitOptions(optimise=True), half - half // 2
    return SplitOptions(method="hmp" if any(m.startswith("hmp") for m in methods) else "bonferroni"), half


def announce_reach(alphas: Sequence[float], n_questions: int, ceiling: float | None = None) -> None:
    """One stderr line per level: what the flag rule needs of the generator; with a ``ceiling``, what it reaches."""
    split, n_cal = lenient_split(METHODS, n_questions)
    for alpha in sorted(alphas):
        print(f"conformal-rag: {reach_line(max(1, n_cal), round(1.0 - alpha, 12), split, ceiling)}", file=sys.stderr)


def run_pilot(
    questions: list[Any], alphas: Sequence[float], request: EvaluateAnswersRequest, score: Any
) -> tuple[PilotEstimate | None, list[Any]]:
    """Draw a seeded pilot from the answerable ``questions``, judge it at the most demanding level, return the rest.

    ``score(pilot)`` gives the pilot questions' generator scores. The target is what the current flag
    rule needs of the generator under the evaluated method that asks least of it
    (:func:`lenient_split`, with its calibration size). The pilot questions are left out of the
    evaluation (the decision to go on depends on them). The pilot's line and, per level, what the
    generator reaches go to stderr before the full sampling (without a pilot: what each level needs);
    a target clearly out of reach raises
    :class:`~conformal_rag_plugins.core.errors.UnreachableTargetError` (exit 2).
    """
    options = PilotOptions.resolve(request.pilot or None)
    size = pilot_size(len(questions), options, needed=2)
    pilot, rest = draw_pilot(questions, size, request.seed)
    n_evaluated = min(len(rest), request.max_questions)
    if not pilot:
        announce_reach(alphas, n_evaluated)
        return None, rest
    scores = score(pilot)
    split, n_cal = lenient_split(METHODS, n_evaluated)
    estimate = PilotEstimate(
        n_questions=len(scores),
        n_hits=sum(1 for s in scores if math.isfinite(s)),
        confidence=options.confidence,
        confidence_level=round(1.0 - min(alphas), 12),
        split=split,
        question_ids=tuple(str(q.id) for q in pilot),
        n_calibration=max(1, n_cal),
    )
    print(f"conformal-rag: {estimate.summary()}", file=sys.stderr)
    announce_reach(alphas, n_evaluated, estimate.ceiling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageCeilingWarning)  # the stderr line above already says it
        judge_pilot(estimate, advice=CLI_ADVICE)
    return estimate, rest


def run_evaluate_answers(request: EvaluateAnswersRequest) -> dict[str, Any]:
    """Sample (cached), then evaluate every method at every alpha; unanswerable questions get own rows.

    All top ``answer_pool`` candidates are sampled, so set sizes are exact and chunks are chosen
    without the gold; gold beyond that pool is a retrieval miss. ``generator_score="likelihood"``
    samples token logprobs and breaks frequency ties with them. Bad counts, malformed files (file
    and line), unknown qa ids and unwritable ``json_out`` are refused before any work.

    Entries longer than the embedding window are chunked as ``evaluate`` chunks them (LlamaIndex
    ``SentenceSplitter`` in MiniLM tokens, ``chunk_size``/``chunk_overlap``, gold documents moved
    onto the chunks holding an answer; the report's ``chunking`` block counts them);
    ``chunking=False`` indexes the entries whole.

    With ``pilot`` questions (default 5, at most a fifth of the answerable ones; 0 turns it off) a
    seeded pilot first samples their gold chunks (:func:`run_pilot`): its line (coverage ceiling,
    upper bound, reachable levels) goes to stderr, a target clearly out of reach raises
    :class:`~conformal_rag_plugins.core.errors.UnreachableTargetError`, and the pilot questions are
    left out of the evaluation (recorded in ``report["pilot"]``).
    """
    from ..llamaindex.answer_sampler import LlamaIndexSampler, model_id

    r = request
    alphas = [check_alpha(a) for a in r.alphas]
    for name, value in (("answer_pool", r.answer_pool), ("samples", r.samples)):
        check_at_least(name, value)
    check_trials(r.trials)
    check_at_least("max_questions", r.max_questions)
    check_at_least("pilot", r.pilot, 0)
    check_at_least("seed", r.seed, 0)
    check_outputs(files=[r.json_out], inputs=[*r.corpus, r.qa])
    entries = load_corpus(*r.corpus)
    question_file = read_questions(r.qa, "qa")
    loaded = list(question_file.examples)
    chunk_report: dict[str, Any] | None = None
    if r.chunking:  # as `evaluate` does: split past the window, gold onto the chunks holding an answer
        chunked = chunk_corpus("llamaindex", entries, loaded, chunk_size=r.chunk_size, chunk_overlap=r.chunk_overlap)
        entries, loaded, chunk_report = list(chunked.chunks), chunked.questions, chunked.report()
    texts = {e.id: e.text for e in entries}
    check_gold_in_corpus(loaded, texts, r.qa)
    everything = split_examples(loaded, (1.0,), seed=r.seed)[0]
    answerable = [q for q in everything if not q.is_impossible]
    impossible = [q for q in everything if q.is_impossible][: max(1, r.max_questions // 4)]
    if not answerable:
        raise InputFileError(f"{r.qa}: no answerable questions to evaluate.")
    announce_questions(question_file)
    bundle = build_host("llamaindex", "hybrid", entries, pool_size=50)
    model = _llm(r.llm, logprobs=r.generator_score == "likelihood")
    sampler = LlamaIndexSampler(
        model,
        n_samples=r.samples,
        max_concurrency=1 if r.llm == "local" else 4,
        cache=SampleCache(default_cache_dir() / "samples.sqlite"),
    )
    sample = AnsweredSamples(sampler.asample, model_id(model))  # a dead endpoint stops at its first draw
    estimate, answerable = run_pilot(
        answerable,
        alphas,
        r,
        lambda pilot: _pilot_ceiling(
            pilot,
            bundle.fetch,
            texts,
            sample,
            pool=r.answer_pool,
            n_samples=r.samples,
            generator_score=r.generator_score,
        ),
    )
    answerable = answerable[: r.max_questions]  # the pilot came from all of them, so up to max_questions remain
    questions = answerable + impossible
    rows = build_rows(questions, bundle.fetch, texts, sample, pool=r.answer_pool, progress=r.progress)
    prepared = prepare_rows(rows, n_samples=r.samples, pool=r.answer_pool, generator_score=r.generator_score)
    ans = [p for p, row in zip(prepared, rows, strict=True) if not row["is_impossible"]]
    imp = [p for p, row in zip(prepared, rows, strict=True) if row["is_impossible"]]
    results = evaluate_methods(ans, alphas, methods=METHODS, trials=r.trials, seed=r.seed)
    for row in results:
        row["subset"] = "answerable"
    results += evaluate_abstention(ans, imp, alphas)
    report = {
        "n_questions": len(ans),
        "n_unanswerable": len(imp),
        "n_corpus": len(entries),
        "chunking": chunk_report,
        "question_format": question_file.form,
        "llm": model_id(model),
        "samples": r.samples,
        "answer_pool": r.answer_pool,
        "generator_score": r.generator_score,
        "coverage_ceiling": sum(math.isfinite(q.r_gen) for q in ans) / max(1, len(ans)),
        "results": results,
    }
    if estimate is not None:
        report["pilot"] = estimate.to_dict()
    with_confidence_levels(report["results"])
    if r.json_out is not None:
        atomic_write_text(r.json_out, json.dumps(report, indent=2) + "\n")
    return report
