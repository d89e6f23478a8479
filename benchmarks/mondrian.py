"""Per-group (Mondrian) retrieval thresholds on the bundled SQuAD subset (issue 11 part 2, issue 21 part 2).

The bundled corpus (SQuAD paragraphs and distractors) is indexed as the tests do (Chroma + MiniLM,
the default hybrid BM25 + dense host of each framework, pool 50); every answerable question is
queried once. Then ``--trials`` seeded random calibration/test halves are simulated on those pools
(:func:`conformal_rag_plugins.evaluation.mondrian_trials.simulate_group_splits`): on each split, the
pooled split-conformal threshold and each group's own threshold, and every group's test
coverage and mean set size under both. Three groupings:

* ``question_type``: the first wh-word of the question
  (:func:`conformal_rag_plugins.local.groups.question_type`), known before retrieval, used as
  ``group_by=question_type`` (one threshold per query);
* ``collection``: label-conditional. The corpus served as five collections (an article's
  paragraphs plus a fifth of the distractors, :func:`~conformal_rag_plugins.local.groups.bundled_collection`);
  each question counts in its gold chunk's collection, and every chunk is kept against its own
  collection's threshold (``chunk_group_key="collection"``); set sizes are counted chunk by chunk;
* ``article``: the article of the gold passage used as a query group, as in the first version
  of this benchmark. A user does not know it before retrieval; it is kept for reference (its
  coverage is what the ``collection`` form achieves with chunk groups).

Reported per framework, alpha and group, with the worst group's coverage and the set-size price
(mean set size over all test questions, per group vs pooled).

Writes ``benchmarks/results/mondrian.json`` and ``benchmarks/results/mondrian.md``.

Usage::

    .venv/bin/python benchmarks/mondrian.py [--trials 500] [--seed 0] [--family relative]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ALPHAS = (0.05, 0.1, 0.2)
FRAMEWORKS = ("llamaindex", "langchain")
GROUPINGS = ("question_type", "collection", "article")


def summarize(sim: Any) -> dict[str, Any]:
    """Per-article rows and the headline numbers of one simulation."""
    per = sim.report()
    weights = sim.n / sim.n.sum()
    size_pooled = float(np.nansum(np.nanmean(sim.size_pooled, axis=0) * weights))
    size_group = float(np.nansum(np.nanmean(sim.size_group, axis=0) * weights))
    cov_pooled = np.nanmean(sim.coverage_pooled, axis=0)
    cov_group = np.nanmean(sim.coverage_group, axis=0)
    return {
        "groups": per,
        "worst_group": {
            "pooled": {"group": sim.groups[int(np.argmin(cov_pooled))], "mean_coverage": float(cov_pooled.min())},
            "per_group": {"group": sim.groups[int(np.argmin(cov_group))], "mean_coverage": float(cov_group.min())},
        },
        "overall_coverage": {
            "pooled": float(np.sum(cov_pooled * weights)),
            "per_group": float(np.sum(cov_group * weights)),
        },
        "mean_set_size": {"pooled": size_pooled, "per_group": size_group, "ratio": size_group / size_pooled},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", default="relative", choices=["relative", "similarity", "rank"])
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

    from conformal_rag_plugins.commands.hosts import build_host
    from conformal_rag_plugins.commands.tables import markdown_table
    from conformal_rag_plugins.core.splits import RandomSplits
    from conformal_rag_plugins.evaluation.mondrian_trials import simulate_group_splits
    from conformal_rag_plugins.local.chroma import chroma_client
    from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
    from conformal_rag_plugins.local.groups import bundled_collection, question_type
    from conformal_rag_plugins.retrieval.pool_calibration import observe

    entries = list(bundled_corpus())
    questions = list(bundled_questions(True))
    labels = {
        "question_type": [question_type(ex.question) for ex in questions],
        "collection": [bundled_collection(ex.gold_ids[0]) for ex in questions],
        "article": [ex.gold_ids[0].split("#")[0] for ex in questions],
    }
    client = chroma_client()
    results: dict[str, Any] = {}
    by_grouping: dict[str, Any] = {g: {} for g in GROUPINGS}
    rows, detail = [], []
    t0 = time.perf_counter()
    for framework in FRAMEWORKS:
        host = build_host(framework, "hybrid", entries, pool_size=50, client=client)
        pools = [host.fetch(ex.question) for ex in questions]
        obs = [observe(ex, pool) for ex, pool in zip(questions, pools, strict=True)]
        chunk_groups = [[bundled_collection(str(i)) for i in pool.ids] for pool in pools]
        for grouping in GROUPINGS:
            by_grouping[grouping][framework] = {}
            for alpha in ALPHAS:
                sim = simulate_group_splits(
                    obs,
                    labels[grouping],
                    alpha,
                    family=args.family,
                    splits=RandomSplits(trials=args.trials, seed=args.seed),
                    candidate_groups=chunk_groups if grouping == "collection" else None,
                )
                out = summarize(sim)
                by_grouping[grouping][framework][f"{alpha:g}"] = out
                if grouping == "article":
                    results.setdefault(framework, {})[f"{alpha:g}"] = out
                rows.append(
                    {
                        "grouping": grouping,
                        "framework": framework,
                        "alpha": alpha,
                        "worst_pooled": f"{out['worst_group']['pooled']['mean_coverage']:.3f} "
                        f"({out['worst_group']['pooled']['group']})",
                        "worst_per_group": f"{out['worst_group']['per_group']['mean_coverage']:.3f} "
                        f"({out['worst_group']['per_group']['group']})",
                        "size_pooled": round(out["mean_set_size"]["pooled"], 2),
                        "size_per_group": round(out["mean_set_size"]["per_group"], 2),
                        "size_ratio": round(out["mean_set_size"]["ratio"], 2),
                    }
                )
                for g, v in out["groups"].items():
                    detail.append(
                        {
                            "grouping": grouping,
                            "framework": framework,
                            "alpha": alpha,
                            "group": g,
                            "n": v["n"],
                            "cov_pooled": round(v["pooled"]["mean_coverage"], 3),
                            "cov_per_group": round(v["per_group"]["mean_coverage"], 3),
                            "size_pooled": round(v["pooled"]["mean_set_size"], 2),
                            "size_per_group": round(v["per_group"]["mean_set_size"], 2),
                            "frac_trials_keep_all": round(v["frac_trials_pooled_fallback"], 3),
                        }
                    )
    report = {
        "config": {
            "trials": args.trials,
            "seed": args.seed,
            "family": args.family,
            "alphas": list(ALPHAS),
            "host": "hybrid (BM25 + MiniLM dense), pool 50",
            "groups": "SQuAD article of the gold paragraph",
            "groupings": {
                "question_type": "first wh-word of the question (query-time group, group_by=question_type)",
                "collection": "label-conditional: the chunk's collection (article + a fifth of the distractors); "
                "each chunk kept against its own collection's threshold",
                "article": "article of the gold paragraph as a query group (not known at query time; reference)",
            },
            "calibration_fraction": 0.5,
            "n_questions": len(questions),
        },
        "environment": {"python": platform.python_version(), "machine": platform.machine()},
        "seconds": round(time.perf_counter() - t0, 1),
        "results": results,
        "by_grouping": by_grouping,
    }
    out_dir = HERE / "results"
    (out_dir / "mondrian.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    md = [
        "# Per-group (Mondrian) thresholds: a query-time group and the label-conditional form",
        "",
        f"{len(questions)} answerable SQuAD questions, hybrid host (pool 50), family `{args.family}`, "
        f"{args.trials} seeded 50/50 calibration/test splits. Coverage is the mean over the splits of the share "
        "of a group's test questions whose gold chunk is kept; set size is the mean number of chunks returned. "
        "`question_type`: one threshold per query, by its first wh-word (`group_by=question_type`). "
        "`collection`: label-conditional, each chunk kept against its own collection's threshold "
        "(`chunk_group_key`); five collections, each an article's paragraphs plus a fifth of the distractors. "
        "`article`: the gold paragraph's article as a query group, which a user does not know before retrieval "
        "(reference only). A group too small for its own rank in a split keeps every candidate there "
        "(`frac_trials_keep_all`).",
        "",
        f"Command: `python benchmarks/mondrian.py --trials {args.trials} --seed {args.seed} --family {args.family}`",
        "",
        markdown_table(
            rows,
            [
                "grouping",
                "framework",
                "alpha",
                "worst_pooled",
                "worst_per_group",
                "size_pooled",
                "size_per_group",
                "size_ratio",
            ],
        ),
        "",
        "## Per group",
        "",
        markdown_table(
            detail,
            [
                "grouping",
                "framework",
                "alpha",
                "group",
                "n",
                "cov_pooled",
                "cov_per_group",
                "size_pooled",
                "size_per_group",
                "frac_trials_keep_all",
            ],
        ),
        "",
    ]
    (out_dir / "mondrian.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
