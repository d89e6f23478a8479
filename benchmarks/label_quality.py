"""Label quality of calibration without labels (CONFLARE steps 1-2), and its distribution shift.

On the bundled SQuAD subset the true gold passage of every real question is known, so we can
check the generated-and-judged calibration against it:

1. **Generation**: the local LLM writes ``--questions`` questions from a seeded, document-balanced
   sample of the (chunked) corpus; filters drop bad output (counts reported).
2. **Judge labelling** over the host ranking (hybrid BM25 + MiniLM, LlamaIndex), budget ``--budget``.
   Agreement on the generated questions: the labelled chunk holds the generated answer, and is the
   source chunk. Agreement on ``--real`` real SQuAD questions labelled the same way (their reference
   answer shown to the judge, no source chunk): the judged chunk is the true gold passage. A lexical
   judge ("the reference answer string is in the chunk", no LLM) is the comparison point.
3. **Shift**: a threshold calibrated on the generated-and-judged questions is applied to the 705 real
   SQuAD questions with their true labels; coverage there against the target is the shift CONFLARE's
   limitations section warns about. The in-distribution reference is a threshold calibrated on real
   questions (random halves).

Writes ``benchmarks/results/label_quality.{json,md}``. LLM outputs and judge decisions are cached, so a
re-run is fast.

Usage::

    .venv/bin/python benchmarks/label_quality.py [--questions 150] [--real 150] [--budget 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
from conformal_rag_plugins.commands.hosts import build_host
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.datasets.examples import CalibrationExample, split_examples
from conformal_rag_plugins.labelling.chunk_labels import answer_in_text
from conformal_rag_plugins.labelling.llm_judge import LabelReport, alabel_examples
from conformal_rag_plugins.labelling.options import JudgeOptions, QuestionOptions
from conformal_rag_plugins.llamaindex.host import pool_from_nodes
from conformal_rag_plugins.llamaindex.judge_labels import label_with_judge
from conformal_rag_plugins.llamaindex.question_gen import generate_calibration_questions
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.llamaindex_models import local_llm
from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

OUT = Path(__file__).resolve().parent / "results"
ALPHAS = (0.1, 0.2)
FAMILY = "relative"
ONE_AT_A_TIME = JudgeOptions(max_concurrency=1)  # the local LLM serves one call at a time


def _coverage(obs: Sequence[PoolObservation], q: float) -> tuple[float, float]:
    pairs = [o.covered_and_size(FAMILY, q) for o in obs]
    return float(np.mean([c for c, _ in pairs])), float(np.mean([s for _, s in pairs]))


def _threshold(obs: Sequence[PoolObservation], alpha: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return conformal_quantile([o.score(FAMILY) for o in obs], alpha)


def _lexical_labels(
    real: Sequence[CalibrationExample], rank: Any, budget: int
) -> tuple[list[CalibrationExample], LabelReport]:
    """Label with a judge that only checks whether the reference answer string is in the chunk."""

    async def judge(question: str, answer: str, chunk: str) -> bool:
        return answer_in_text([answer], chunk)

    return asyncio.run(alabel_examples(real, rank, judge, budget=budget))


def _agreement_real(labelled: Sequence[CalibrationExample], truth: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    n = len(labelled)
    found = [ex for ex in labelled if ex.gold_ids]
    right = sum(1 for ex in found if set(ex.gold_ids) & set(truth[ex.question]))
    return {
        "n": n,
        "labelled": len(found),
        "labelled_share": len(found) / n if n else 0.0,
        "agree_with_true_gold": right / n if n else 0.0,
        "precision_when_labelled": right / len(found) if found else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=150, help="questions to generate")
    parser.add_argument("--real", type=int, default=150, help="real SQuAD questions labelled by the judge")
    parser.add_argument("--budget", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=100, help="random halves for the real-question reference")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    t_start = time.perf_counter()

    chunked = chunk_corpus("llamaindex", list(bundled_corpus()), list(bundled_questions(True)))
    chunks, real_questions = list(chunked.chunks), chunked.questions
    bundle = build_host("llamaindex", "hybrid", chunks, client=chroma_client())
    host = bundle.host

    def rank(question: str) -> list[tuple[str | None, str]]:
        pool = pool_from_nodes(host.retrieve(question))[0]
        return list(zip(pool.ids, pool.texts, strict=True))

    # 1. generation
    t0 = time.perf_counter()
    writer = local_llm(temperature=0.7, max_new_tokens=64)
    generated, gen_report = generate_calibration_questions(
        chunks, writer, args.questions, seed=args.seed, options=QuestionOptions(max_concurrency=1, progress=True)
    )
    t_gen = time.perf_counter() - t0
    print(gen_report.summary(), flush=True)

    # 2. judge labelling of the generated questions
    t0 = time.perf_counter()
    judge_llm = local_llm(temperature=0.0, max_new_tokens=3)
    labelled, label_report = label_with_judge(host, generated, judge_llm, budget=args.budget, options=ONE_AT_A_TIME)
    t_label = time.perf_counter() - t0
    print(label_report.summary(), flush=True)
    texts = {c.id: c.text for c in chunks}
    gen_rows = []
    for ex in labelled:
        gold = ex.gold_ids[0] if ex.gold_ids else None
        gen_rows.append(
            {
                "rule": ex.metadata.get("label_rule"),
                "is_source": gold == ex.metadata.get("source_chunk_id"),
                "holds_answer": bool(gold) and answer_in_text(ex.answers, texts.get(gold, "")),
            }
        )
    generated_agreement = {
        "n": len(gen_rows),
        "label_is_source_chunk": float(np.mean([r["is_source"] for r in gen_rows])) if gen_rows else 0.0,
        "labelled_chunk_holds_answer": float(np.mean([r["holds_answer"] for r in gen_rows])) if gen_rows else 0.0,
        "by_rule": {k: sum(1 for r in gen_rows if r["rule"] == k) for k in ("judge", "source", "budget-exhausted")},
    }

    # 2b. the same judge on real questions (reference answers, no source chunk)
    rng = np.random.default_rng(args.seed)
    pick = rng.choice(len(real_questions), size=min(args.real, len(real_questions)), replace=False)
    real_sample = [real_questions[i] for i in sorted(pick)]
    truth = {q.question: q.gold_ids for q in real_sample}
    stripped = [replace(q, gold_ids=(), gold_texts=(), metadata={}) for q in real_sample]
    t0 = time.perf_counter()
    real_llm, real_llm_report = label_with_judge(host, stripped, judge_llm, budget=args.budget, options=ONE_AT_A_TIME)
    t_real = time.perf_counter() - t0
    real_lex, _ = _lexical_labels(stripped, rank, args.budget)
    judges = [
        {"judge": "Gemma 3 270M (LLM judge)", **_agreement_real(real_llm, truth)},
        {"judge": "answer string in chunk (no LLM)", **_agreement_real(real_lex, truth)},
    ]

    # 3. shift: calibrate on generated+judged, test on the real questions with true labels
    gen_obs = collect_observations([ex for ex in labelled if ex.gold_ids], bundle.fetch, progress=False)
    real_obs = collect_observations(real_questions, bundle.fetch, progress=False)
    shift = []
    for alpha in ALPHAS:
        q_gen = _threshold(gen_obs, alpha)
        cov_real, size_real = _coverage(real_obs, q_gen)
        halves = []
        for t in range(args.trials):
            cal, test = split_examples(gen_obs, (0.5, 0.5), seed=args.seed + t)
            halves.append(_coverage(test, _threshold(cal, alpha)))
        refs = []
        for t in range(args.trials):
            cal, test = split_examples(real_obs, (0.5, 0.5), seed=args.seed + t)
            refs.append(_coverage(test, _threshold(cal, alpha)))
        shift.append(
            {
                "alpha": alpha,
                "target": 1 - alpha,
                "n_generated_calibration": len(gen_obs),
                "threshold_from_generated": q_gen,
                "coverage_on_real": cov_real,
                "set_size_on_real": size_real,
                "coverage_on_held_out_generated": float(np.mean([c for c, _ in halves])),
                "reference_coverage_real_calibration": float(np.mean([c for c, _ in refs])),
                "reference_set_size_real_calibration": float(np.mean([s for _, s in refs])),
            }
        )
        print(f"alpha={alpha}: generated threshold covers {cov_real:.3f} of the real questions", flush=True)

    report = {
        "config": vars(args) | {"out": str(args.out), "framework": "llamaindex", "host": "hybrid zscore:0.5"},
        "machine": f"{platform.machine()} {platform.python_version()}",
        "seconds": {
            "generation": round(t_gen, 1),
            "labelling_generated": round(t_label, 1),
            "labelling_real": round(t_real, 1),
            "total": round(time.perf_counter() - t_start, 1),
        },
        "generation": {"summary": gen_report.summary(), "counts": asdict(gen_report)},
        "labelling": {"summary": label_report.summary(), "agreement": generated_agreement},
        "real_question_labels": judges,
        "real_question_llm_report": real_llm_report.summary(),
        "shift": shift,
        "examples": [ex.to_dict() for ex in labelled[:10]],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "label_quality.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    md = [
        "# Calibration without labels: label quality and shift",
        "",
        f"Bundled SQuAD subset, chunked; LlamaIndex hybrid host (BM25 + MiniLM, z-score 0.5, pool 50); local "
        f"Gemma 3 270M writes and judges; judge budget {args.budget} chunks per question.",
        "",
        "## Generation",
        "",
        "```",
        gen_report.summary(),
        "```",
        "",
        "## Labels of the generated questions",
        "",
        "```",
        label_report.summary(),
        "```",
        "",
        f"Labelled chunk holds the generated answer: {generated_agreement['labelled_chunk_holds_answer']:.3f}; "
        f"labelled chunk is the source chunk: {generated_agreement['label_is_source_chunk']:.3f}.",
        "",
        f"## The judge on {len(real_sample)} real SQuAD questions (true gold known)",
        "",
        markdown_table(judges, ["judge", "labelled_share", "agree_with_true_gold", "precision_when_labelled"]),
        "",
        "## Shift: threshold from generated questions, coverage on the 705 real questions",
        "",
        markdown_table(
            shift,
            [
                "alpha",
                "target",
                "n_generated_calibration",
                "coverage_on_held_out_generated",
                "coverage_on_real",
                "set_size_on_real",
                "reference_coverage_real_calibration",
                "reference_set_size_real_calibration",
            ],
        ),
    ]
    (args.out / "label_quality.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
