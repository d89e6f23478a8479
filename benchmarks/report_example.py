"""The calibration report on the bundled SQuAD subset: what ``conformal-rag report`` shows.

Calibrates with ``conformal-rag calibrate`` on 300 seeded random answerable questions (a dense
host, and the default tuned hybrid), writes the other 405 answerable questions as the held-out
qa file, runs ``conformal-rag report`` on each, and collects the plotted numbers. Writes
``benchmarks/results/report_example.json`` and ``report_example.md``; the report folders go to a
temporary directory (printed). About a minute.

Usage::

    .venv/bin/python benchmarks/report_example.py
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.datasets.examples import save_examples
from conformal_rag_plugins.local.corpus import bundled_questions
from conformal_rag_plugins.local.data import bundled_corpus_paths

OUT = Path(__file__).resolve().parent / "results"
N_CALIBRATION, SEED, ALPHA = 300, 0, 0.1


def main_() -> None:
    corpus = [arg for path in bundled_corpus_paths() for arg in ("--corpus", str(path))]
    qa_rows = [json.loads(line) for line in bundled_corpus_paths()[0].with_name("qa.jsonl").open(encoding="utf-8")]
    questions = list(bundled_questions(True))
    picked = {questions[i].id for i in np.random.default_rng(SEED).choice(len(questions), N_CALIBRATION, replace=False)}
    tmp = Path(tempfile.mkdtemp(prefix="crp-report-"))
    save_examples([q for q in questions if q.id in picked], tmp / "labelled.jsonl")
    heldout = [r for r in qa_rows if not r.get("is_impossible") and r["id"] not in picked]
    (tmp / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in heldout), encoding="utf-8")
    rows, runs = [], {}
    for name, extra in (("dense", ["--retriever", "dense"]), ("tuned hybrid", [])):
        cal = tmp / f"{name.replace(' ', '_')}.json"
        out = tmp / "reports" / name.replace(" ", "_")
        t0 = time.perf_counter()
        assert main(["calibrate", *corpus, "--questions", str(tmp / "labelled.jsonl"), "--alpha", str(ALPHA),
                     "--persist-dir", str(tmp / "chroma"), "--out", str(cal), "--quiet", *extra]) == 0  # fmt: skip
        t1 = time.perf_counter()
        assert main(["report", "--calibration", str(cal), *corpus, "--qa", str(tmp / "heldout.jsonl"),
                     "--out", str(out), "--quiet"]) == 0  # fmt: skip
        t2 = time.perf_counter()
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
        runs[name] = {k: report[k] for k in ("host", "n_heldout", "coverage", "set_sizes", "scores")}
        runs[name]["seconds"] = {"calibrate": round(t1 - t0, 1), "report": round(t2 - t1, 1)}
        grid = report["coverage"]
        triples = [
            t for t in zip(grid["coverage"], grid["band_low"], grid["band_high"], strict=True) if t[1] is not None
        ]
        inside = sum(lo <= c <= hi for c, lo, hi in triples)
        below = sum(c < lo for c, lo, _ in triples)
        at = grid["levels"].index(grid["calibrated_level"])
        methods = report["set_sizes"]["methods"]
        rows.append(
            {
                "host": name + (f" ({report['host']['fusion']})" if report["host"]["fusion"] else ""),
                "family": grid["family"],
                "n_cal": grid["n_calibration"],
                "n_test": grid["n_test"],
                "coverage@0.9": round(grid["coverage"][at], 3),
                "band@0.9": f"[{grid['band_low'][at]:.3f}, {grid['band_high'][at]:.3f}]",
                "levels in/below band": f"{inside}/{below} of {len(triples)}",
                "top-1 cov": round(methods["topk@1"]["coverage"], 3),
                "conformal size": round(methods["conformal"]["mean_size"], 2),
                "top-5 cov/size": f"{methods['topk@5']['coverage']:.3f}/5",
                "CONFLARE cov/size": f"{methods['conflare']['coverage']:.3f}/{methods['conflare']['mean_size']:.2f}",
                "misses cal/test": f"{report['scores']['n_misses']}/{report['scores']['heldout_misses']}",
                "report s": round(t2 - t1, 1),
            }
        )
    OUT.mkdir(exist_ok=True)
    (OUT / "report_example.json").write_text(json.dumps({"alpha": ALPHA, "seed": SEED, "runs": runs}, indent=2) + "\n")
    table = markdown_table(rows, list(rows[0]))
    (OUT / "report_example.md").write_text(
        f"# Calibration report on the bundled SQuAD subset\n\n{N_CALIBRATION} seeded random questions calibrate "
        f"(alpha={ALPHA}); the other answerable questions are held out. Band: central 95% of the exact "
        "Beta-Binomial law of split-conformal held-out coverage; "
        "levels above the band are those below the top-1 rate, where the relative score ties at 0 for every top-1 "
        "hit (ties only raise coverage).\n\n" + table + "\n",
        encoding="utf-8",
    )
    print(table)
    print(f"reports in {tmp / 'reports'}")


if __name__ == "__main__":
    main_()
