"""What the guaranteed flag promises at each pool-miss rate, and what the rule costs (issue 41, items 2 and 3).

For alpha = 0.1 (the bound a flagged set assumes: b = alpha/2) and pool-miss rates
pi in {0, alpha/2, 3alpha/4, alpha, 2alpha}:

- split and PAC (epsilon = delta = 0.1), exactly (:mod:`conformal_rag_plugins.evaluation.flag_exact`):
  P(flag) and, given the flag, the coverage (split) or P(miscoverage > epsilon) (PAC);
- recall control, CRC and Learn-then-Test (delta = 0.1), by seeded simulation through
  ``RetrievalConformalizer`` (two gold chunks per question, each missing at pi): P(flag) and the mean
  recall given the flag;
- the cost without misses: mean set size given the flag against the plain rank ceil((n+1)(1-alpha)), on
  seeded pools of 20 that never miss.

Each figure for the current rule (``pool-miss-2``) beside the first pool-miss rule (``pool-miss-1``).
Writes ``benchmarks/results/flag_miss_rates.json`` and ``.md``.

Usage::

    .venv/bin/python benchmarks/flag_miss_rates.py [--seed 0] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE, POOL_MISS_1_RULE, THRESHOLD_RULE, threshold_rule
from conformal_rag_plugins.evaluation.flag_exact import pac_given_flag, split_given_flag
from conformal_rag_plugins.evaluation.flag_trials import simulate_flag_coverage, simulate_recall_given_flag

HERE = Path(__file__).resolve().parent
ALPHA = 0.1
RATES = (0.0, ALPHA / 2, 0.75 * ALPHA, ALPHA, 2 * ALPHA)
RULES = {"now": THRESHOLD_RULE, "before": POOL_MISS_1_RULE}


def _fmt(x: float, digits: int = 3) -> str:
    return "-" if x != x else f"{x:.{digits}f}"


def exact_rows() -> list[dict]:
    rows = []
    for method in ("split", "pac"):
        for n in (20, 50, 100, 300, 1000):
            for pi in RATES:
                row: dict = {"method": method, "n": n, "miss_rate": pi}
                for name, rule in RULES.items():
                    with threshold_rule(rule):
                        got = split_given_flag(n, ALPHA, pi) if method == "split" else pac_given_flag(n, ALPHA, 0.1, pi)
                    row[name] = {"flag_rate": got.flag_rate, "given_flag": got.given_flag}
                rows.append(row)
    return rows


def recall_rows(seed: int, scale: float) -> list[dict]:
    rows = []
    for method in ("crc", "ltt"):
        for n, draws in ((50, 300), (300, 80)):
            for pi in RATES[1:]:
                row: dict = {"method": method, "n": n, "miss_rate": pi, "draws": max(2, round(draws * scale))}
                for name, rule in RULES.items():
                    got = simulate_recall_given_flag(
                        n, 1 - ALPHA, pi, draws=row["draws"], seed=seed, n_gold=2, rule=rule, method=method,
                        delta=0.1 if method == "ltt" else None,
                    )  # fmt: skip
                    row[name] = {"flag_rate": got.flag_rate, "given_flag": got.coverage, "se": got.se}
                print(row, flush=True)
                rows.append(row)
    return rows


def cost_rows(seed: int, scale: float) -> list[dict]:
    rows = []
    for n in (20, 40, 50, 100, 300):
        draws = max(2, round(300 * scale))
        sizes = {}
        for name, rule in {**RULES, "plain": PLAIN_RANK_RULE}.items():
            sizes[name] = simulate_flag_coverage(n, 1 - ALPHA, 0.0, draws=draws, seed=seed, rule=rule).mean_size
        rows.append({"n": n, "draws": draws, "mean_size": sizes})
        print(rows[-1], flush=True)
    return rows


def markdown(report: dict) -> str:
    md = [
        "# What the guaranteed flag promises at each pool-miss rate",
        "",
        "alpha = 0.1; a flagged set assumes the pool misses at most b = alpha/2 of questions. **now**: the current "
        "rule (`pool-miss-2`: the plain rank when nothing missed, misses past the 0.9 quantile of Binomial(n, b) "
        "withdraw the flag); **before**: the first pool-miss rule (one rank, cap at the 0.999 quantile). Each cell: "
        "the figure given the flag / P(flag).",
        "",
        f"Command: `{report['command']}` ({report['seconds']} s).",
        "",
        "**Split** (coverage given the flag, target 0.9) and **PAC** (P(miscoverage > 0.1) given the flag, target "
        "<= 0.1), exact:",
        "",
        "| method | n | " + " | ".join(f"pi = {pi:g} now | before" for pi in RATES) + " |",
        "|---|---|" + "---|---|" * len(RATES),
    ]
    for method in ("split", "pac"):
        for n in (20, 50, 100, 300, 1000):
            cells = []
            for row in report["exact"]:
                if row["method"] == method and row["n"] == n:
                    for name in RULES:
                        cells.append(f"{_fmt(row[name]['given_flag'])} / {row[name]['flag_rate']:.2f}")
            md.append(f"| {method} | {n} | " + " | ".join(cells) + " |")
    md += [
        "",
        "**Recall control** (mean recall given the flag, target 0.9), seeded simulation:",
        "",
        "| method | n | draws | " + " | ".join(f"pi = {pi:g} now | before" for pi in RATES[1:]) + " |",
        "|---|---|---|" + "---|---|" * (len(RATES) - 1),
    ]
    for method in ("crc", "ltt"):
        for n in (50, 300):
            rows = [r for r in report["recall"] if r["method"] == method and r["n"] == n]
            cells = [f"{_fmt(r[k]['given_flag'])} / {r[k]['flag_rate']:.2f}" for r in rows for k in RULES]
            md.append(f"| {method} | {n} | {rows[0]['draws']} | " + " | ".join(cells) + " |")
    md += [
        "",
        "**The cost when nothing misses**: mean set size given the flag (pools of 20):",
        "",
        "| n | draws | plain rank | now | now / plain | before | before / plain |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["cost"]:
        s = row["mean_size"]
        md.append(
            f"| {row['n']} | {row['draws']} | {s['plain']:.2f} | {s['now']:.2f} | {s['now'] / s['plain']:.2f} | "
            f"{s['before']:.2f} | {s['before'] / s['plain']:.2f} |"
        )
    return "\n".join(md) + "\n"


def rewrite_markdown() -> None:
    """Rewrite the markdown from the saved JSON (no new run)."""
    out = HERE / "results"
    report = json.loads((out / "flag_miss_rates.json").read_text(encoding="utf-8"))
    (out / "flag_miss_rates.md").write_text(markdown(report), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every number of draws")
    args = parser.parse_args()
    start = time.time()
    report = {
        "benchmark": "flag_miss_rates",
        "command": f"python benchmarks/flag_miss_rates.py --seed {args.seed} --scale {args.scale:g}",
        "alpha": ALPHA,
        "python": platform.python_version(),
        "exact": exact_rows(),
        "recall": recall_rows(args.seed, args.scale),
        "cost": cost_rows(args.seed, args.scale),
    }
    report["seconds"] = round(time.time() - start, 1)
    out = HERE / "results"
    (out / "flag_miss_rates.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "flag_miss_rates.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
