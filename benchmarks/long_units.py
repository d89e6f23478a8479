"""What the LLM reads: the tuned default choosing the unit (chunk, parent, whole document) by context tokens.

Runs ``conformal-rag evaluate``'s code path (``run_evaluate``) with its defaults (tuned
hybrid, ``--unit auto``, pools 50/100/200 gated by the miss share) on:

* the bundled 1,179 short SQuAD passages (nothing is split, so only chunk level exists);
* the 199 long documents (6 paragraphs, about 670 MiniLM tokens) chunked to the 254-token window;
* the same long documents chunked small (80 tokens), so that a question's words and its
  answer often fall in different chunks.

For each it reports the tuned default (coverage, mean set size in returned units, mean
context tokens), the previous default (``tuned-chunks``: chunk level, pool 50, smallest
set) and the best fixed setting in hindsight (fewest tokens over every unit x fusion x
pool x family, each calibrated on the whole calibration half of the same trials).

Writes ``benchmarks/results/long_units.json`` and ``long_units.md``.

Usage::

    .venv/bin/python benchmarks/long_units.py [--trials 100] [--frameworks llamaindex langchain]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

from conformal_rag_plugins.commands.evaluate_retrieval import EvaluateRequest, run_evaluate
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.long_documents import bundled_long_documents

OUT = Path(__file__).resolve().parent / "results"
ALPHA = 0.1
SEED = 0


def _setting(choice: str) -> str:
    """``"key|family"`` as ``"key (family)"`` (a bar would split a markdown cell)."""
    key, _, family = choice.rpartition("|")
    return f"{key} ({family})"


def _row(framework: str, case: str, report: dict, seconds: float) -> dict:
    rows = {r["method"]: r for r in report["results"]}
    tuned = rows["tuned"]
    old = rows.get("tuned-chunks", tuned)
    best = report["best_fixed"][f"{ALPHA:g}"]
    choice = report["tuning"][f"{ALPHA:g}"]
    return {
        "framework": framework,
        "corpus": case,
        "units": len(report["units"]),
        "tuned coverage": round(tuned["mean_coverage"], 3),
        "tuned set size": round(tuned["mean_set_size"], 2),
        "tuned tokens": round(tuned["mean_context_tokens"]),
        "most chosen": _setting(choice["most_chosen"]),
        "unit": choice["unit"],
        "previous default (chunks) coverage": round(old["mean_coverage"], 3),
        "previous default tokens": round(old["mean_context_tokens"]),
        "best fixed in hindsight": _setting(best["setting"]),
        "best fixed tokens": round(best["mean_context_tokens"]),
        "tuned / best fixed": round(tuned["mean_context_tokens"] / best["mean_context_tokens"], 2),
        "previous / tuned": round(old["mean_context_tokens"] / tuned["mean_context_tokens"], 2),
        "pool misses (base)": report["n_pool_misses"],
        "seconds": round(seconds, 1),
    }


def run(frameworks: list[str], trials: int) -> dict:
    client = chroma_client()
    docs, long_questions = bundled_long_documents()
    cases = [
        ("short passages", list(bundled_corpus()), list(bundled_questions(True)), None),
        ("long, chunked to 254 tokens", docs, long_questions, None),
        ("long, chunked to 80 tokens", docs, long_questions, 80),
    ]
    rows, reports = [], []
    for framework in frameworks:
        for case, entries, questions, chunk_size in cases:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                report = run_evaluate(
                    EvaluateRequest(
                        corpus=entries,
                        qa=questions,
                        alphas=[ALPHA],
                        trials=trials,
                        seed=SEED,
                        framework=framework,
                        chunk_size=chunk_size,
                    ),
                    client=client,
                    progress=False,
                )
            rows.append(_row(framework, case, report, time.perf_counter() - t0))
            reports.append(
                {"framework": framework, "corpus": case}
                | {
                    k: report[k]
                    for k in ("units", "pool_sizes", "tuning", "best_fixed", "mean_unit_tokens", "warnings")
                }
                | {"results": report["results"]}
            )
            print(json.dumps(rows[-1]), flush=True)
    return {
        "alpha": ALPHA,
        "trials": trials,
        "seed": SEED,
        "python": platform.python_version(),
        "results": rows,
        "reports": reports,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--frameworks", nargs="+", default=["llamaindex", "langchain"])
    args = parser.parse_args()
    write(run(args.frameworks, args.trials))


def write(report: dict) -> None:
    """Write the JSON and the markdown table into ``benchmarks/results/``."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "long_units.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    cols = [
        "framework",
        "corpus",
        "tuned coverage",
        "tuned set size",
        "tuned tokens",
        "most chosen",
        "unit",
        "previous default tokens",
        "best fixed in hindsight",
        "best fixed tokens",
        "tuned / best fixed",
        "previous / tuned",
        "seconds",
    ]
    md = [
        "# What the LLM reads: unit, fusion and pool chosen by context tokens",
        "",
        f"`run_evaluate` defaults (tuned hybrid, `--unit auto`, pools 50/100/200), alpha = {ALPHA}, "
        f"{report['trials']} random 50/50 splits (seed {SEED}). Tokens are MiniLM word pieces of the returned units "
        "(what an LLM would read). `previous default` is the chunk-level, pool-50, smallest-set tuning "
        "(the report's `tuned-chunks` row) on the same trials; `best fixed` is the setting with the fewest tokens "
        "in hindsight.",
        "",
        markdown_table(report["results"], cols),
        "",
    ]
    (OUT / "long_units.md").write_text("\n".join(md), encoding="utf-8")


if __name__ == "__main__":
    main()
