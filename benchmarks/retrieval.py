"""Retrieval benchmark: coverage and set size per host retriever and score family.

Runs on the bundled SQuAD 2.0 subset (705 answerable questions, 1,179 passages) with the
offline stack (MiniLM + Chroma + BM25) in both frameworks. Writes
``benchmarks/results/retrieval.json`` and ``benchmarks/results/retrieval.md``.

The ``long`` part (issue 5) joins 6 consecutive paragraphs of an article into one
long document (about 520 words, 670 MiniLM tokens) and compares, on the same questions:
short passages, long documents indexed whole (MiniLM truncates them), and long
documents chunked to the embedding window; each fixed fusion setting against the
tuned one (chosen inside every trial on an optimisation part of the calibration
half). It writes ``retrieval_long.json`` and ``retrieval_long.md``.

Usage::

    .venv/bin/python benchmarks/retrieval.py [--part short|long|all] [--trials 100] [--frameworks llamaindex langchain]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
from conformal_rag_plugins.commands.framework_registry import get_framework
from conformal_rag_plugins.commands.hosts import build_host, build_hosts
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.config_search import evaluate_tuned_splits
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.evaluation.retrieval_trials import evaluate_splits
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.long_documents import bundled_long_documents
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import collect_observations
from conformal_rag_plugins.tuning.fusion_config import DEFAULT_FUSION_GRID

OUT = Path(__file__).resolve().parent / "results"
ALPHAS = (0.05, 0.1, 0.2)
FAMILIES = ("similarity", "rank", "relative", "auto")


def _latency(framework: str, bundle, calibration, questions, repeats: int = 1) -> dict[str, float]:
    """Median per-query latency of the bare host vs ConformalRetriever with the same pool."""
    adapter = get_framework(framework)
    wrapped = adapter.conformal_retriever(bundle.kind, bundle.host, calibration)
    bare, conf = adapter.bare_query(bundle.kind, bundle.host, bundle.pool_size), adapter.ask(wrapped)
    times = {"bare": [], "conformal": []}
    for _ in range(repeats):
        for q in questions:
            for name, fn in (("bare", bare), ("conformal", conf)):
                t0 = time.perf_counter()
                fn(q.question)
                times[name].append(time.perf_counter() - t0)
    b, c = statistics.median(times["bare"]), statistics.median(times["conformal"])
    return {"bare_ms": 1000 * b, "conformal_ms": 1000 * c, "ratio": c / b}


def _long_variants(framework: str) -> list[tuple[str, list, list, dict | None]]:
    """(name, entries, questions, chunk report) for short passages and long documents."""
    short_e, short_q = list(bundled_corpus()), list(bundled_questions(True))
    long_e, long_q = bundled_long_documents()
    short = chunk_corpus(framework, short_e, short_q)
    chunked = chunk_corpus(framework, long_e, long_q)
    return [
        ("short passages", list(short.chunks), short.questions, short.report()),
        ("long, no chunking", long_e, long_q, None),
        ("long, chunked", list(chunked.chunks), chunked.questions, chunked.report()),
    ]


def long_part(args: argparse.Namespace) -> None:
    """Long documents: chunking vs none, fixed fusion settings vs tuned, at every alpha."""
    client = chroma_client()
    rows, corpora = [], []
    for framework in args.frameworks:
        for name, entries, questions, report in _long_variants(framework):
            t0 = time.perf_counter()
            bundles = build_hosts(framework, "hybrid", entries, grid=DEFAULT_FUSION_GRID, client=client)
            obs = {c: collect_observations(questions, b.fetch, progress=False) for c, b in bundles.items()}
            unit_tokens = statistics.mean(count_tokens(e.text) for e in entries)
            corpora.append(
                {
                    "framework": framework,
                    "corpus": name,
                    "n_entries": len(entries),
                    "mean_tokens_per_entry": round(unit_tokens, 1),
                    "n_questions": len(questions),
                    "chunking": report,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            for alpha in ALPHAS:
                row = {"framework": framework, "corpus": name, "alpha": alpha}
                for config, o in obs.items():
                    fixed = next(
                        s
                        for s in evaluate_splits(o, alpha, splits=RandomSplits(trials=args.trials, seed=0), topk=())
                        if s.method == "split"
                    ).as_row()
                    row[config.key] = fixed["mean_set_size"]
                    row[f"{config.key} coverage"] = fixed["mean_coverage"]
                tuned, choices = evaluate_tuned_splits(
                    {c.key: o for c, o in obs.items()}, alpha, splits=RandomSplits(trials=args.trials, seed=0)
                )
                t = tuned.as_row()
                fixed_sizes = [row[c.key] for c in obs]
                row |= {
                    "tuned": t["mean_set_size"],
                    "tuned context tokens (approx.)": round(t["mean_set_size"] * unit_tokens),
                    "tuned coverage": t["mean_coverage"],
                    "tuned std": t["std_coverage"],
                    "worst/best fixed": max(fixed_sizes) / min(fixed_sizes),
                    "most chosen": choices.most_common(1)[0][0],
                    "choices": dict(choices.most_common()),
                }
                rows.append(row)
                print(
                    f"{framework} / {name} / alpha={alpha}: tuned {t['mean_set_size']:.2f} chunks, "
                    f"coverage {t['mean_coverage']:.3f}",
                    flush=True,
                )
    for row in rows:
        short = next(
            r
            for r in rows
            if r["framework"] == row["framework"] and r["alpha"] == row["alpha"] and r["corpus"] == "short passages"
        )
        row["tuned vs short"] = row["tuned"] / short["tuned"]
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"trials": args.trials, "pool_size": 50, "paragraphs_per_document": 6, "corpora": corpora}
    (args.out / "retrieval_long.json").write_text(json.dumps({**meta, "results": rows}, indent=2))
    cols = ["framework", "corpus", "alpha", "tuned coverage", "tuned", "tuned vs short"]
    cols += ["tuned context tokens (approx.)", "most chosen"]
    cols += [c.key for c in DEFAULT_FUSION_GRID] + ["worst/best fixed"]
    md = [
        "# Long documents: chunking and the tuned hybrid",
        "",
        "Same 705 questions three ways: the 1,179 short passages; 199 long documents (6 consecutive paragraphs, "
        "about 520 words) indexed whole, so MiniLM reads only their first 254 tokens; the same documents chunked "
        "to the window with each framework's splitter, gold moved to the chunks holding the answer. Hybrid dense "
        f"+ BM25 host, pool 50, {args.trials} random 50/50 splits. Set sizes are in indexed units (passages, "
        "documents or chunks). `tuned` chooses fusion method, dense weight and score family inside every trial on "
        "30% of the calibration half; fixed columns use the `relative` score.",
        "",
        markdown_table(rows, cols),
        "",
        "Context tokens are approximate: mean set size times the mean MiniLM token count of the indexed "
        "units (a whole long document is what an LLM would read, though MiniLM embedded only its start).",
        "",
        markdown_table(
            corpora, ["framework", "corpus", "n_entries", "mean_tokens_per_entry", "n_questions", "seconds"]
        ),
    ]
    (args.out / "retrieval_long.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["short", "long", "all"], default="all")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--frameworks", nargs="+", default=["llamaindex", "langchain"])
    parser.add_argument("--retrievers", nargs="+", default=["dense", "bm25", "hybrid"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.part in ("long", "all"):
        long_part(args)
    if args.part in ("short", "all"):
        short_part(args)


def short_part(args: argparse.Namespace) -> None:
    """Short passages: every host retriever and score family (docs/benchmarks/retrieval.md)."""
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
                    for s in evaluate_splits(
                        obs, alpha, family=family, splits=RandomSplits(trials=args.trials, seed=0), pac_delta=0.1
                    ):
                        row = s.as_row()
                        if row["method"] in ("split", "pac"):
                            row["method"] = f"{row['method']}:{family}"
                        elif family != "relative":
                            continue  # baselines do not depend on the family; keep one copy
                        rows.append({"framework": framework, "retriever": kind, "recall_at_1": recall1, **row})
            adapter = get_framework(framework)
            t0 = time.perf_counter()
            cal = adapter.calibrate_retriever(
                bundle.host, questions[:300], confidence_level=0.9, options=RetrievalOptions(progress=False)
            )
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
