"""``conformal-rag evaluate``: repeated-split coverage and set size on corpus/qa JSONL files."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..calibration.driver import collect_observations
from ..calibration.examples import load_corpus, load_qa
from ..core.retrieval_eval import evaluate_splits
from ..core.validation import check_alpha
from .hosts import build_host

__all__ = ["run_evaluate"]


def run_evaluate(
    corpus: Sequence[str | Path],
    qa: str | Path,
    alphas: Sequence[float],
    *,
    trials: int = 100,
    seed: int = 0,
    score: str = "relative",
    pac_delta: float | None = None,
    retriever: str = "hybrid",
    framework: str = "llamaindex",
    pool_size: int = 50,
    json_out: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the evaluation and return (and optionally write) the JSON report."""
    alphas = [check_alpha(a) for a in alphas]
    entries = load_corpus(*corpus)
    questions = load_qa(qa, answerable_only=True)
    t0 = time.perf_counter()
    bundle = build_host(framework, retriever, entries, pool_size=pool_size)
    t_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    observations = collect_observations(questions, bundle.fetch, progress=progress)
    t_query = time.perf_counter() - t0
    results = []
    for alpha in alphas:
        summaries = evaluate_splits(
            observations, alpha, family=score, trials=trials, seed=seed, pac_delta=pac_delta, topk=(1, 5, 10)
        )
        results.extend(s.as_row() for s in summaries)
    misses = sum(1 for o in observations if not o.gold_positions)
    report = {
        "n_questions": len(questions),
        "n_corpus": len(entries),
        "framework": framework,
        "retriever": retriever,
        "score": score,
        "pool_size": pool_size,
        "n_pool_misses": misses,
        "recall_at_1": sum(1 for o in observations if 0 in o.gold_positions) / max(1, len(observations)),
        "seconds_index": round(t_index, 2),
        "seconds_queries": round(t_query, 2),
        "results": results,
    }
    if json_out is not None:
        Path(json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
