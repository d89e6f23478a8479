"""End-to-end answer sets of the bundled Gemma 3 270M at 1-alpha = 0.3 and 0.2: a finite flagged claim, or why not.

Replays the recorded Gemma samples (``benchmarks/data/squad_gemma_pool_samples.jsonl``: 200 SQuAD
questions, 6 answers at T=1.0 for every chunk of the dense MiniLM top-6 pool; no model runs). Two
generators are read from it: the recorded M = 6 (coverage ceiling 0.69) and a weak one, the first
M = 2 of the same draws (ceiling 0.50, near the 0.46 of ``evaluate --answers`` on the bundled data).
For each level it prints, as the library says before any calibration sampling, what the flag rule
needs of the generator and the highest level its ceiling reaches (``answer_sets/reach.py``), then
evaluates over repeated 50/50 splits (BO on half of the calibration half):

* ``bonferroni``: the equal split, default stage bounds (alpha_stage / 2);
* ``bonferroni-bo``: the split chosen by BO, default bounds;
* ``bonferroni-bo-held-out``: the split and both stages' miss bounds chosen on the optimisation part
  (``SplitOptions(generator_miss_bound="held-out")``).

Writes ``benchmarks/results/answer_sets_weak_generator.{json,md}``.

Usage::

    .venv/bin/python benchmarks/answer_sets_weak_generator.py [--trials 20] [--alpha 0.7 0.8]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.answer_sets.reach import reach_line
from conformal_rag_plugins.answer_sets.split_optimisation import answer_sets, choose_split, make_rule
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.answer_metrics import evaluate_answer_set
from conformal_rag_plugins.core.errors import CoverageCeilingWarning
from conformal_rag_plugins.evaluation.answer_set_trials import evaluate_methods, prepare_rows

HERE = Path(__file__).resolve().parent
METHODS = ("bonferroni", "bonferroni-bo", "bonferroni-bo-held-out")
HELD_OUT = SplitOptions(optimise=True, bo_calls=8, retrieval_miss_bound="held-out", generator_miss_bound="held-out")


def one_calibration(questions: list[Any], alpha: float, m: int) -> dict[str, Any]:
    """One seeded run as ``AnswerSetConformalizer`` does it: bounds and split on a quarter, thresholds on a quarter,
    coverage on the other half; the optimiser's reason when no split can be flagged."""
    order = np.random.default_rng(0).permutation(len(questions))
    quarter = len(questions) // 4
    opt = [questions[i] for i in order[:quarter]]
    cal = [questions[i] for i in order[quarter : 2 * quarter]]
    test = [questions[i] for i in order[2 * quarter :]]
    penalty = float(len(questions[0].chunk_ids) * m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageCeilingWarning)
        choice = choose_split(opt, alpha, split=HELD_OUT, penalty=penalty)
    out: dict[str, Any] = {"target": round(1 - alpha, 2), "M": m, "feasible": choice["feasible"]}
    if not choice["feasible"]:
        return {**out, "says": choice["infeasible_reason"]}
    bounds = (choice.get("miss_bound_retrieval"), choice.get("miss_bound_generation"))
    rule = make_rule("bonferroni", [q.r_ret for q in cal], [q.r_gen for q in cal], alpha,
                     a_ret=choice["alpha_retrieval"], miss_bounds=bounds)  # fmt: skip
    sets = answer_sets(rule, test)
    covered = [evaluate_answer_set(s, q.answers).covered for s, q in zip(sets, test, strict=True)]
    return {
        **out,
        "alpha_retrieval": round(choice["alpha_retrieval"], 4),
        "miss_bounds": [None if b is None else round(b, 4) for b in bounds],
        "q_ret": rule.q_ret,
        "q_gen": rule.q_gen,
        "guaranteed": rule.guaranteed,
        "test_coverage": float(np.mean(covered)),
        "says": f"flagged: q_ret {rule.q_ret:.4g}, q_gen {rule.q_gen:.4g}" if rule.guaranteed else rule.reason,
    }


def first_draws(rows: list[dict[str, Any]], m: int) -> list[dict[str, Any]]:
    """The rows with only the first ``m`` recorded answers (and log-probabilities) of every chunk."""
    return [
        {
            **r,
            "samples": {c: s[:m] for c, s in r["samples"].items()},
            "logprobs": {c: lp[:m] for c, lp in r.get("logprobs", {}).items()},
        }
        for r in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples-file", type=Path, default=HERE / "data" / "squad_gemma_pool_samples.jsonl")
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.7, 0.8])
    parser.add_argument("--samples", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--bo-calls", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.samples_file.read_text(encoding="utf-8").splitlines() if line]
    t0 = time.perf_counter()
    results, reach, single = [], [], []
    for m in args.samples:
        questions = prepare_rows(first_draws(rows, m), n_samples=m)
        ceiling = sum(math.isfinite(q.r_gen) for q in questions) / len(questions)
        n_final = len(questions) // 2 - len(questions) // 4  # the BO methods' calibration part
        for alpha in args.alpha:
            level = round(1 - alpha, 2)
            for name, split in (
                ("default bound", SplitOptions(optimise=True)),
                ("held-out bound", SplitOptions(optimise=True, generator_miss_bound="held-out")),
            ):
                reach.append({"M": m, "ceiling": ceiling, "target": level, "bound": name,
                              "says": reach_line(n_final, level, split, ceiling)})  # fmt: skip
            single.append(one_calibration(questions, alpha, m))
        got = evaluate_methods(questions, args.alpha, methods=METHODS, trials=args.trials, bo_calls=args.bo_calls)
        results += [{**r, "M": m, "ceiling": round(ceiling, 3), "target": round(1 - r["alpha"], 2)} for r in got]
    report = {
        "samples_file": str(args.samples_file.relative_to(HERE.parent)),
        "n_questions": len(rows),
        "trials": args.trials,
        "bo_calls": args.bo_calls,
        "seconds": round(time.perf_counter() - t0, 1),
        "reach": reach,
        "one_calibration": single,
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answer_sets_weak_generator.json").write_text(json.dumps(report, indent=2) + "\n")
    for r in results:
        r.setdefault("mean_miss_bound_gen", math.nan)
        r.setdefault("mean_feasible", math.nan)
    md = [
        "# Answer sets of a weak generator: a finite flagged claim at 1-alpha = 0.3 and 0.2, or why not",
        "",
        f"Replayed Gemma 3 270M samples ({len(rows)} SQuAD questions, dense MiniLM top-6 pool, no model run): "
        "M = 6 as recorded, and M = 2 (the first two of the same draws: a weaker generator). "
        f"{args.trials} random 50/50 splits; BO ({args.bo_calls} calls) on half of the calibration half. "
        "`frac_trials_guaranteed`: the share of splits whose rule is flagged (both thresholds finite).",
        "",
        "What the library says before sampling the calibration (the flag rule's need and the reach of the "
        "data's ceiling; n = the BO methods' calibration part):",
        "",
        *[f"- M = {r['M']}, target {r['target']}, {r['bound']}: `{r['says']}`" for r in reach],
        "",
        "The generator's reach above leaves the retrieval stage out; one seeded calibration with both stages' "
        "bounds held out (split and bounds on 50 questions, thresholds on 50, coverage on 100) says what the "
        "whole rule can do:",
        "",
        *[
            f"- M = {r['M']}, target {r['target']}: {r['says']}"
            + (
                f" (alpha_retrieval {r['alpha_retrieval']}, miss bounds {r['miss_bounds']}, held-out coverage "
                f"{r['test_coverage']:.3f})"
                if r["feasible"]
                else ""
            )
            for r in single
        ],
        "",
        markdown_table(
            results,
            [
                "M",
                "ceiling",
                "target",
                "method",
                "frac_trials_guaranteed",
                "mean_coverage",
                "frac_trials_coverage_ge_target",
                "mean_set_size_sem",
                "mean_alpha_ret",
                "mean_miss_bound_gen",
                "mean_feasible",
            ],
        ),
        "",
        "`mean_feasible` is the share of splits whose optimisation part found a split the held-out bounds allow "
        "(else the optimiser said so and the rule keeps the default bound). Coverage is the held-out half's.",
    ]
    (args.out / "answer_sets_weak_generator.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
