"""Recall-control benchmark: questions with several gold chunks, recall rule beside the single-gold rule.

The bundled SQuAD paragraphs are joined 6 at a time into long documents
(``local/long_documents.py``) and chunked to the MiniLM window with each framework's
own splitter; every chunk that holds a reference answer is gold
(``calibration/chunk_labels.py``), so about a quarter of the 705 questions have two or
more gold chunks. Each host (dense, and the hybrid at its fixed ``zscore:0.5`` setting)
is queried once per question (pool 50); then ``TRIALS`` random calibration/test halves
compare, on the ``relative`` score family:

* ``crc``: conformal risk control of the miss rate ``1 - recall`` (``E[1 - recall] <= alpha``);
* ``ltt``: Learn-then-Test at ``delta = 0.1`` (``P(risk <= alpha) >= 0.9`` over calibration draws);
* ``single-gold``: today's split-conformal threshold on the best gold chunk (controls the
  chance of keeping *some* gold chunk, not recall).

Writes ``benchmarks/results/recall_control.json`` and ``recall_control.md``.

Usage::

    .venv/bin/python benchmarks/recall_control.py [--trials 500] [--frameworks llamaindex langchain]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
from conformal_rag_plugins.commands.hosts import build_host
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.recall_pools import RecallPools
from conformal_rag_plugins.evaluation.recall_trials import evaluate_recall_splits
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.long_documents import bundled_long_documents
from conformal_rag_plugins.retrieval.pool_calibration import collect_observations
from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig

OUT = Path(__file__).resolve().parent / "results"
ALPHAS = (0.05, 0.1, 0.2)
FAMILY = "relative"
DELTA = 0.1
SEED = 11


def run(frameworks: list[str], trials: int) -> dict:
    client = chroma_client()
    docs, questions = bundled_long_documents()
    rows, stacks = [], []
    for framework in frameworks:
        t0 = time.perf_counter()
        chunked = chunk_corpus(framework, docs, questions)
        seconds_chunking = round(time.perf_counter() - t0, 1)
        for kind, fusion in (("dense", None), ("hybrid", FusionConfig("zscore", 0.5))):
            t0 = time.perf_counter()
            bundle = build_host(framework, kind, chunked.chunks, client=client, fusion=fusion)
            obs = collect_observations(chunked.questions, bundle.fetch, progress=False)
            pools = RecallPools.build(obs, FAMILY)
            counts = np.asarray([g.size for g in pools.gold])
            stacks.append(
                {
                    "framework": framework,
                    "retriever": kind if fusion is None else f"{kind} {fusion.key}",
                    "n_questions": len(obs),
                    "n_chunks": len(chunked.chunks),
                    "n_multi_gold": int((counts > 1).sum()),
                    "mean_gold_chunks": round(float(counts.mean()), 3),
                    "n_gold_outside_pool": int(sum(int(np.isinf(g).sum()) for g in pools.gold)),
                    "seconds_chunking": seconds_chunking,
                    "seconds_index_and_query": round(time.perf_counter() - t0, 1),
                }
            )
            for alpha in ALPHAS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    summaries = evaluate_recall_splits(
                        obs, alpha, family=FAMILY, trials=trials, seed=SEED, ltt_delta=DELTA, pools=pools
                    )
                for s in summaries:
                    rec = np.asarray(s.recalls)
                    row = s.as_row()
                    row.update(
                        framework=framework,
                        retriever=stacks[-1]["retriever"],
                        sem_recall=float(rec.std(ddof=1) / math.sqrt(rec.size)),
                        frac_trials_risk_above_alpha=float(np.mean(1 - rec > alpha)),
                    )
                    rows.append(row)
    return {
        "trials": trials,
        "seed": SEED,
        "family": FAMILY,
        "delta": DELTA,
        "pool_size": 50,
        "calibration_fraction": 0.5,
        "stacks": stacks,
        "results": rows,
        "platform": platform.platform(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--frameworks", nargs="+", default=["llamaindex", "langchain"])
    args = parser.parse_args()
    t0 = time.perf_counter()
    report = run(args.frameworks, args.trials)
    report["seconds_total"] = round(time.perf_counter() - t0, 1)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "recall_control.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    cols = [
        "framework",
        "retriever",
        "alpha",
        "method",
        "target_recall",
        "mean_recall",
        "sem_recall",
        "frac_trials_risk_above_alpha",
        "mean_coverage",
        "mean_set_size",
    ]
    md = [
        "# Recall control on long documents chunked (several gold chunks per question)",
        "",
        f"{args.trials} random calibration/test halves, seed {SEED}, family {FAMILY}, pool 50, LTT delta {DELTA}.",
        "`mean_recall` is the mean over trials of the test half's mean recall of the gold chunks; "
        "`frac_trials_risk_above_alpha` is the share of trials whose test-half miss rate exceeds alpha.",
        "",
        markdown_table(report["stacks"], list(report["stacks"][0])),
        "",
        markdown_table(report["results"], cols),
        "",
    ]
    (OUT / "recall_control.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
