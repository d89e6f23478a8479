"""``conformal-rag evaluate --answers``: end-to-end answer-set evaluation on corpus/qa JSONL."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..calibration.examples import load_corpus, load_qa, split_examples
from ..core.validation import check_alpha
from ..generation import SampleCache
from ..local.encoder import default_cache_dir
from .answer_eval import METHODS, evaluate_abstention, evaluate_methods, prepare_rows
from .hosts import build_host
from .sample_rows import build_rows

__all__ = ["run_evaluate_answers"]


def _llm(kind: str, logprobs: bool = False) -> Any:
    from ..llamaindex.llm import default_llm, local_llm
    from ..local.llm import openai_settings

    if kind == "openai":
        if openai_settings() is None:
            raise SystemExit("--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server).")
        llm = default_llm(temperature=1.0)
        if logprobs:
            llm.logprobs = True  # OpenAI(-like): report token logprobs
        return llm
    return local_llm(temperature=1.0, logprobs=logprobs)


def run_evaluate_answers(
    corpus: Sequence[str | Path],
    qa: str | Path,
    alphas: Sequence[float],
    *,
    llm: str = "local",
    samples: int = 6,
    max_questions: int = 100,
    answer_pool: int = 10,
    generator_score: str = "frequency",
    trials: int = 20,
    seed: int = 0,
    json_out: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Sample (cached), then evaluate every method at every alpha; unanswerable questions get own rows.

    Every one of the top ``answer_pool`` candidates of each question is sampled, so any
    retrieval set is fully sampled: set sizes are exact, and the chunks are chosen without
    looking at the gold. The retrieval stage uses that pool (gold beyond it is a miss).
    ``generator_score="likelihood"`` samples with token logprobs and breaks frequency ties with them.
    """
    if answer_pool < 1:
        raise SystemExit(f"--answer-pool must be >= 1, got {answer_pool}.")
    from ..llamaindex.sampling import LlamaIndexSampler, model_id

    alphas = [check_alpha(a) for a in alphas]
    entries = load_corpus(*corpus)
    texts = {e.id: e.text for e in entries}
    everything = split_examples(load_qa(qa), (1.0,), seed=seed)[0]
    answerable = [q for q in everything if not q.is_impossible][:max_questions]
    impossible = [q for q in everything if q.is_impossible][: max(1, max_questions // 4)]
    bundle = build_host("llamaindex", "hybrid", entries, pool_size=50)
    model = _llm(llm, logprobs=generator_score == "likelihood")
    sampler = LlamaIndexSampler(
        model,
        n_samples=samples,
        max_concurrency=1 if llm == "local" else 4,
        cache=SampleCache(default_cache_dir() / "samples.sqlite"),
    )
    questions = answerable + impossible
    rows = build_rows(questions, bundle.fetch, texts, sampler.asample, pool=answer_pool, progress=progress)
    prepared = prepare_rows(rows, n_samples=samples, pool=answer_pool, generator_score=generator_score)
    ans = [p for p, r in zip(prepared, rows, strict=True) if not r["is_impossible"]]
    imp = [p for p, r in zip(prepared, rows, strict=True) if r["is_impossible"]]
    results = evaluate_methods(ans, alphas, methods=METHODS, trials=trials, seed=seed)
    for r in results:
        r["subset"] = "answerable"
    results += evaluate_abstention(ans, imp, alphas)
    report = {
        "n_questions": len(ans),
        "n_unanswerable": len(imp),
        "llm": model_id(model),
        "samples": samples,
        "answer_pool": answer_pool,
        "generator_score": generator_score,
        "coverage_ceiling": sum(math.isfinite(q.r_gen) for q in ans) / max(1, len(ans)),
        "results": results,
    }
    if json_out is not None:
        Path(json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
