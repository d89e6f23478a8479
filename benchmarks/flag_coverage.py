"""Coverage given the ``guaranteed`` flag when the candidate pool can miss the gold (issue 33, item 1).

For n in {20, 50, 100, 1000} calibration questions and pool-miss rates {0, alpha/8, alpha/4, alpha/2}
(alpha = 0.1), seeded draws calibrate ``RetrievalConformalizer(0.9, score="similarity")`` on synthetic
pools of 20 (:func:`conformal_rag_plugins.evaluation.flag_trials.simulate_flag_coverage`) and serve 20
fresh questions each. Only the draws whose threshold is finite count, as a user reads the flag per
answer. ``before`` is the plain rank ``ceil((n+1)(1-alpha))`` (the rule until this change), ``after``
the rule of :func:`conformal_rag_plugins.core.quantile.flagged_rank`. Beside the simulated coverage,
the exact value of each rule (continuous scores) from the closed form in ``tests/core/test_quantile_flagged.py``.

Writes ``benchmarks/results/flag_coverage.json`` and ``benchmarks/results/flag_coverage.md``.

Usage::

    .venv/bin/python benchmarks/flag_coverage.py [--seed 0] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict
from pathlib import Path

from scipy.stats import binom

from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE, THRESHOLD_RULE, conformal_rank, flagged_rank
from conformal_rag_plugins.evaluation.flag_trials import simulate_flag_coverage

HERE = Path(__file__).resolve().parent
ALPHA = 0.1
NS = {20: 4000, 50: 2000, 100: 1000, 1000: 600}  # n -> draws
MISS_RATES = (0.0, ALPHA / 8, ALPHA / 4, ALPHA / 2)


def exact(n: int, pi: float, rule: str) -> float:
    """``P(covered | flag)`` of the rule, exactly, for continuous scores and i.i.d. misses at ``pi``."""
    if rule == PLAIN_RANK_RULE:
        k, m_max = conformal_rank(n, ALPHA), n - conformal_rank(n, ALPHA)
    else:
        got = flagged_rank(n, ALPHA)
        assert got is not None
        k, m_max = got.rank, got.max_misses
    return float(binom.cdf(m_max, n + 1, pi) * k / (n + 1) / binom.cdf(m_max, n, pi))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every number of draws")
    args = parser.parse_args()
    start = time.time()
    rows = []
    for n, draws in NS.items():
        draws = max(2, round(draws * args.scale))
        for pi in MISS_RATES:
            row = {"n": n, "miss_rate": pi, "draws": draws}
            for name, rule in (("before", PLAIN_RANK_RULE), ("after", THRESHOLD_RULE)):
                trial = simulate_flag_coverage(n, 1 - ALPHA, pi, draws=draws, seed=args.seed, rule=rule)
                row[name] = {**asdict(trial), "exact_coverage": exact(n, pi, rule)}
            rows.append(row)
            shown = {k: (round(row[k]["coverage"], 4), round(row[k]["mean_size"], 2)) for k in ("before", "after")}
            print(n, pi, shown)
    report = {
        "benchmark": "flag_coverage",
        "command": f"python benchmarks/flag_coverage.py --seed {args.seed} --scale {args.scale:g}",
        "alpha": ALPHA,
        "pool_size": 20,
        "n_test_per_draw": 20,
        "seconds": round(time.time() - start, 1),
        "python": platform.python_version(),
        "rows": rows,
    }
    out = HERE / "results"
    (out / "flag_coverage.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    md = [
        "# Coverage given the guaranteed flag, when the pool can miss the gold",
        "",
        f"Target 1 - alpha = {1 - ALPHA:g}. Synthetic pools of 20 whose gold is missing with probability `miss "
        "rate`, independently; each draw calibrates `RetrievalConformalizer(0.9, score=\"similarity\")` on `n` "
        "questions and serves 20 fresh ones, and only draws flagged `guaranteed` (finite threshold) count. "
        "**Before**: the plain rank ceil((n+1)(1-alpha)). **After**: `flagged_rank` (pool misses up to alpha/2 "
        "assumed). Coverage: simulated ± one standard error over draws, then the exact value of the rule. Size: "
        "mean number of chunks kept, given the flag.",
        "",
        f"Command: `{report['command']}` ({report['seconds']} s).",
        "",
        "| n | miss rate | draws | P(flag) before | coverage before (exact) | size before "
        "| P(flag) after | coverage after (exact) | size after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        b, a = row["before"], row["after"]
        md.append(
            f"| {row['n']} | {row['miss_rate']:.4g} | {row['draws']} | {b['flag_rate']:.2f} "
            f"| {b['coverage']:.3f} ± {b['se']:.3f} ({b['exact_coverage']:.4f}) | {b['mean_size']:.2f} "
            f"| {a['flag_rate']:.2f} | {a['coverage']:.3f} ± {a['se']:.3f} ({a['exact_coverage']:.4f}) "
            f"| {a['mean_size']:.2f} |"
        )
    (out / "flag_coverage.md").write_text("\n".join(md) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
