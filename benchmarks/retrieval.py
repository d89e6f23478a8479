"""Retrieval benchmark: coverage and set size per host retriever and score family.

Runs on the bundled SQuAD 2.0 subset (705 answerable questions, 1,179 passages) with the
offline stack (MiniLM + Chroma + BM25) in both frameworks. Writes
``benchmarks/results/retrieval.json`` and ``benchmarks/results/retrieval.md``.

Usage::

    .venv/bin/python benchmarks/retrieval.py [--trials 100] [--frameworks llamaindex langchain]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

from conformal_rag_plugins.apps.hosts import build_host
from conformal_rag_plugins.apps.tables import markdown_table
from conformal_rag_plugins.calibration.driver import collect_observations
from conformal_rag_plugins.core import evaluate_splits
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions

OUT = Path(__file__).resolve().parent / "results"
ALPHAS = (0.05, 0.1, 0.2)
FAMILIES = ("similarity", "rank", "relative", "auto")


def _latency(framework: str, bundle, calibration, questions, repeats: int = 1) -> dict[str, float]:
    """Median per-query latency of the bare host vs ConformalRetriever with the same pool."""
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever

        wrapped = ConformalRetriever(retriever=bundle.host, calibration=calibration)
        bare, conf = bundle.host.retrieve, wrapped.retrieve
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever

        key = "vectorstore" if bundle.kind == "dense" else "retriever"
        wrapped = ConformalRetriever(calibration=calibration, **{key: bundle.host})
        if bundle.kind == "dense":

            def bare(q):
                return bundle.host.similarity_search_with_relevance_scores(q, k=bundle.pool_size)
        else:
            bare = bundle.host.invoke
        conf = wrapped.invoke
    times = {"bare": [], "conformal": []}
    for _ in range(repeats):
        for q in questions:
            for name, fn in (("bare", bare), ("conformal", conf)):
                t0 = time.perf_counter()
                fn(q.question)
                times[name].append(time.perf_counter() - t0)
    b, c = statistics.median(times["bare"]), statistics.median(times["conformal"])
    return {"bare_ms": 1000 * b, "conformal_ms": 1000 * c, "ratio": c / b}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--frameworks", nargs="+", default=["llamaindex", "langchain"])
    parser.add_argument("--retrievers", nargs="+", default=["dense", "bm25", "hybrid"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    entries, questions = list(bundled_corpus()), list(bundled_questions(True))
    client = chroma_client()
    rows, perf = [], []
    for framework in args.frameworks:
        for kind in args.retrievers:
            bundle = build_host(framework, kind, entries, pool_size=50, client=client)
            t0 = time.perf_counter()
            obs = collect_observations(questions, bundle.fetch, progress=False)
            elapsed = time.perf_counter() - t0
            recall1 = sum(0 in o.gold_positions for o in obs) / len(obs)
            for alpha in ALPHAS:
                for family in FAMILIES:
                    for s in evaluate_splits(obs, alpha, family=family, trials=args.trials, seed=0, pac_delta=0.1):
                        row = s.as_row()
                        if row["method"] in ("split", "pac"):
                            row["method"] = f"{row['method']}:{family}"
                        elif family != "relative":
                            continue  # baselines do not depend on the family; keep one copy
                        rows.append({"framework": framework, "retriever": kind, "recall_at_1": recall1, **row})
            if framework == "llamaindex":
                from conformal_rag_plugins.llamaindex import calibrate_retriever
            else:
                from conformal_rag_plugins.langchain import calibrate_retriever
            t0 = time.perf_counter()
            cal = calibrate_retriever(bundle.host, questions[:300], confidence_level=0.9, progress=False)
            cal_qps = 300 / (time.perf_counter() - t0)
            lat = _latency(framework, bundle, cal, questions[300:400])
            perf.append(
                {
                    "framework": framework,
                    "retriever": kind,
                    "recall_at_1": recall1,
                    "pool_queries_per_s": len(questions) / elapsed,
                    "calibration_questions_per_s": cal_qps,
                    **lat,
                }
            )
            print(f"{framework}/{kind}: recall@1={recall1:.3f}, latency ratio {lat['ratio']:.2f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "n_questions": len(questions),
        "n_corpus": len(entries),
        "trials": args.trials,
        "pool_size": 50,
        "machine": f"{platform.machine()} {platform.python_version()}",
    }
    (args.out / "retrieval.json").write_text(json.dumps({**meta, "results": rows, "performance": perf}, indent=2))
    headline = [
        r
        for r in rows
        if r["alpha"] in (0.05, 0.1)
        and r["method"] in ("split:relative", "split:similarity", "split:auto", "pac:relative", "conflare", "topk@5")
    ]
    md = [
        "# Retrieval benchmark",
        "",
        f"SQuAD 2.0 subset: {len(questions)} answerable questions, {len(entries)} passages, pool 50, "
        f"{args.trials} random 50/50 calibration/test splits (seed 0). PAC rows use epsilon=alpha, delta=0.1.",
        "",
        markdown_table(
            headline,
            ["framework", "retriever", "alpha", "method", "mean_coverage", "std_coverage", "mean_set_size"],
        ),
        "",
        "## Latency and calibration throughput",
        "",
        markdown_table(
            perf,
            [
                "framework",
                "retriever",
                "recall_at_1",
                "bare_ms",
                "conformal_ms",
                "ratio",
                "calibration_questions_per_s",
            ],
        ),
        "",
        "All rows, including alpha=0.2, rank and top-k baselines, are in `retrieval.json`.",
    ]
    (args.out / "retrieval.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
