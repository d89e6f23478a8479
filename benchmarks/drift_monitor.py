"""Drift-monitor benchmark: false alarms on exchangeable SQuAD streams, and time to alarm under drift.

The label-free statistic (top-1 host score, or the gap to the second hit) is computed once
per question through each real host (MiniLM + Chroma, dense or hybrid, both frameworks):

- the bundled SQuAD subset (705 answerable questions, 1,179 passages): calibration and
  null stream;
- the long-document variant (the same paragraphs joined 6 at a time and chunked to the
  254-token window, ``local/long_documents.py``): the same questions asked of a changed
  corpus, the drifted stream.

Then, in numpy with the library's ``OnlineConformalTest``:

(a) no drift: 200 random orders. ``random split``: every order draws a new calibration of
    300 questions and streams the other 405 (the setting of the guarantee);
    ``fixed calibration``: one calibration (the drop-in tests' split, 300), 200 random orders
    of the 405 held out. Alarms must occur in at most delta of the orders (Ville).
    Negative controls: p-values against the fixed calibration bag only (50 calibration
    questions, 655 streamed), and a per-query test (alarm at the first p <= delta).
(b) drift: the fixed calibration, then the 705 long-document queries in 200 random orders:
    the share of orders with an alarm and the number of queries until it.

Finally the user path: ``ConformalRetriever(..., options=ServingOptions(monitor=...))`` (LlamaIndex, dense) replays the
held-out SQuAD questions in file order (grouped by article: not exchangeable) and shuffled,
and the long-document questions in file order; the per-query cost of
``ConformalMonitor.observe`` is timed.

Usage::

    .venv/bin/python benchmarks/drift_monitor.py [--orders 200]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
import warnings
from bisect import bisect_left, bisect_right
from pathlib import Path

import numpy as np

from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
from conformal_rag_plugins.commands.hosts import build_host
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.martingale import OnlineConformalTest, SimpleJumper, strangeness, tie_uniform
from conformal_rag_plugins.core.online_coverage import aci_miss
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.long_documents import bundled_long_documents
from conformal_rag_plugins.monitor.monitor import ConformalMonitor, CoverageTracking
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import collect_observations
from conformal_rag_plugins.retrieval.serving import ServingOptions

OUT = Path(__file__).resolve().parent / "results"
N_CAL = 300
SPLIT_SEED = 20261122  # the drop-in tests' calibration split
SEED = 1107
DELTAS = (0.01, 0.05)
STATISTICS = ("top1", "gap")


def _stat(name: str, scores: np.ndarray) -> float:
    raw = float(scores[0]) if name == "top1" else float(scores[0] - scores[1])
    return strangeness(name, raw)


def _first_alarm(reference, stream, delta: float, seed: int) -> int | None:
    test = OnlineConformalTest(reference, delta=delta, seed=seed)
    for v in stream:
        test.update(float(v))
        if test.alarm_at is not None:
            break
    return test.alarm_at


def _fixed_bag(reference, stream, delta: float, seed: int) -> bool:
    bag, m = sorted(float(v) for v in reference), SimpleJumper()
    for i, v in enumerate(stream):
        greater, equal = len(bag) - bisect_right(bag, v), bisect_right(bag, v) - bisect_left(bag, v)
        if m.update((greater + tie_uniform(seed, i) * (equal + 1)) / (len(bag) + 1)) >= math.log(1 / delta):
            return True
    return False


def _per_query(reference, stream, delta: float, seed: int) -> bool:
    test = OnlineConformalTest(reference, delta=delta, seed=seed)
    return any(test.update(float(v)) <= delta for v in stream)


def _rows(setting: str, short: np.ndarray, long: np.ndarray, orders: int) -> list[dict]:
    rows = []
    n = short.size
    fixed = np.random.default_rng(SPLIT_SEED).permutation(n)
    cal, held = short[fixed[:N_CAL]], short[fixed[N_CAL:]]
    for delta in DELTAS:
        rng = np.random.default_rng(SEED)
        random_split = fixed_cal = 0
        first: list[int | None] = []
        bag_wrong = per_query_wrong = 0
        for r in range(orders):
            perm = rng.permutation(n)
            random_split += _first_alarm(short[perm[:N_CAL]], short[perm[N_CAL:]], delta, r) is not None
            fixed_cal += _first_alarm(cal, held[rng.permutation(held.size)], delta, r) is not None
            first.append(_first_alarm(cal, long[rng.permutation(long.size)], delta, r))
            if delta == 0.05:
                bag_wrong += _fixed_bag(short[perm[:50]], short[perm[50:]], delta, r)
                per_query_wrong += _per_query(short[perm[:50]], short[perm[50:]], delta, r)
        hit = [a + 1 for a in first if a is not None]  # queries until the alarm (1-based)
        rows.append(
            {
                "setting": setting,
                "delta": delta,
                "null_random_split": random_split / orders,
                "null_fixed_calibration": fixed_cal / orders,
                "wrong_fixed_bag_50": bag_wrong / orders if delta == 0.05 else None,
                "wrong_per_query": per_query_wrong / orders if delta == 0.05 else None,
                "drift_alarm_share": len(hit) / orders,
                "drift_queries_median": float(np.median(hit)) if hit else None,
                "drift_queries_q10": float(np.quantile(hit, 0.1)) if hit else None,
                "drift_queries_q90": float(np.quantile(hit, 0.9)) if hit else None,
                "orders": orders,
            }
        )
    return rows


def _user_path(client, entries, questions, long_chunks, long_questions) -> dict:
    """LlamaIndex dense ConformalRetriever with a monitor, calibrated on 300 questions, replayed in file order."""
    from conformal_rag_plugins.llamaindex import ConformalRetriever, fingerprint_of

    bundle = build_host("llamaindex", "dense", entries, client=client)
    perm = np.random.default_rng(SPLIT_SEED).permutation(len(questions))
    cal_q = [questions[i] for i in sorted(perm[:N_CAL])]
    held = [questions[i] for i in sorted(perm[N_CAL:])]
    obs = collect_observations(cal_q, bundle.fetch, progress=False)
    cal = calibrate_from_pools(
        obs,
        fingerprint=fingerprint_of(bundle.host),
        pool_size=50,
        options=RetrievalOptions(confidence_level=0.9, score="relative"),
    )
    out = {}
    long_host = build_host("llamaindex", "dense", long_chunks, client=client).host
    shuffled = [held[i] for i in np.random.default_rng(SEED).permutation(len(held))]
    streams = (
        ("held_out_squad_file_order", bundle.host, held),
        ("held_out_squad_shuffled", bundle.host, shuffled),
        ("long_documents_file_order", long_host, long_questions),
    )
    for name, host, stream in streams:
        monitor = ConformalMonitor.from_observations(cal, obs, delta=0.01)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            retriever = ConformalRetriever(cal, retriever=host, options=ServingOptions(monitor=monitor))
        for q in stream:
            retriever.retrieve(q.question)
        out[name] = {
            "n_stream": monitor.n_stream,
            "alarm_at": monitor.alarm_at,
            "final_log10_martingale": monitor.log_martingale[-1] / math.log(10),
        }
    monitor = ConformalMonitor.from_observations(cal, obs, delta=0.01)
    scores = np.sort(np.random.default_rng(0).uniform(0.3, 0.9, 50))[::-1].copy()
    t0 = time.perf_counter()
    for _ in range(5000):
        monitor.observe(scores, set_size=5, calibration=cal)
    out["observe_microseconds"] = (time.perf_counter() - t0) / 5000 * 1e6
    return out


def _labels(short_obs, long_obs) -> list[dict]:
    """Labelled streams: realised coverage of the fixed threshold, its anytime interval, and ACI's miss rate."""
    from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
    from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

    perm = np.random.default_rng(SPLIT_SEED).permutation(len(short_obs))
    cal_obs = [short_obs[i] for i in perm[:N_CAL]]
    held = [short_obs[i] for i in perm[N_CAL:]]
    fp = Fingerprint("llamaindex", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "benchmark")
    cal = (
        RetrievalConformalizer(0.9, score="relative")
        .conformalize_pools(cal_obs, fingerprint=fp, pool_size=50)
        .calibration_
    )
    rows = []
    for name, stream in (("held-out SQuAD", held), ("long documents", long_obs)):
        for gamma in (0.01, 0.05):
            monitor = ConformalMonitor.from_observations(
                cal, cal_obs, delta=0.05, coverage=CoverageTracking(aci_gamma=gamma)
            )
            aci_misses = 0
            for o in stream:
                r = o.score("relative")
                aci_misses += aci_miss(r, monitor.aci_threshold())
                monitor.observe(o.scores)
                monitor.observe_label(nonconformity=r)
            lo, hi = monitor.coverage_interval()
            n = len(stream)
            rows.append(
                {
                    "stream": name,
                    "n": n,
                    "alpha": 0.1,
                    "fixed_threshold_coverage": sum(c for c, _ in monitor.labels) / n,
                    "coverage_cs_95_low": lo,
                    "coverage_cs_95_high": hi,
                    "aci_gamma": gamma,
                    "aci_coverage": 1 - aci_misses / n,
                    "aci_bound": (0.9 + gamma) / (gamma * n),
                    "final_aci_alpha": monitor.aci_alpha,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200)
    args = parser.parse_args()
    t_start = time.perf_counter()
    client = chroma_client()
    entries, questions = list(bundled_corpus()), list(bundled_questions(True))
    docs, long_q = bundled_long_documents()
    rows, chunked_by, observed = [], {}, {}
    for framework in ("llamaindex", "langchain"):
        chunked = chunked_by[framework] = chunk_corpus(framework, docs, long_q)
        for kind in ("dense", "hybrid"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                short_obs = collect_observations(
                    questions, build_host(framework, kind, entries, client=client).fetch, progress=False
                )
                long_obs = collect_observations(
                    chunked.questions, build_host(framework, kind, chunked.chunks, client=client).fetch, progress=False
                )
            observed[framework, kind] = short_obs, long_obs
            for stat in STATISTICS:
                short = np.array([_stat(stat, o.scores) for o in short_obs])
                long = np.array([_stat(stat, o.scores) for o in long_obs])
                rows += _rows(f"{framework} {kind} {stat}", short, long, args.orders)
            print(f"{framework} {kind} done ({time.perf_counter() - t_start:.0f} s)", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        long_li = chunked_by["llamaindex"]  # the user path and the label rows are LlamaIndex's dense host
        user = _user_path(client, entries, questions, list(long_li.chunks), long_li.questions)
    label_rows = _labels(*observed["llamaindex", "dense"])
    report = {
        "n_questions": len(questions),
        "n_calibration": N_CAL,
        "orders": args.orders,
        "seed": SEED,
        "results": rows,
        "user_path": user,
        "labels": label_rows,
        "seconds": round(time.perf_counter() - t_start, 1),
        "machine": platform.platform(),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "drift_monitor.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    cols = [
        "setting",
        "delta",
        "null_random_split",
        "null_fixed_calibration",
        "wrong_fixed_bag_50",
        "wrong_per_query",
        "drift_alarm_share",
        "drift_queries_median",
        "drift_queries_q10",
        "drift_queries_q90",
    ]
    md = [
        "# Drift monitor",
        "",
        f"{args.orders} random orders; calibration {N_CAL} SQuAD questions; null stream the other 405; drift stream "
        "the 705 questions asked of the long-document index. Shares are of orders with an alarm; queries are counted "
        "until the first alarm (1-based) over the orders that alarmed.",
        "",
        markdown_table(rows, cols),
        "",
        "Labelled streams (LlamaIndex dense, relative score, alpha = 0.1, calibration 300): realised coverage of "
        "the fixed threshold, its anytime-valid 95% interval at the end, and ACI's coverage.",
        "",
        markdown_table(
            label_rows,
            [
                "stream",
                "n",
                "fixed_threshold_coverage",
                "coverage_cs_95_low",
                "coverage_cs_95_high",
                "aci_gamma",
                "aci_coverage",
                "aci_bound",
            ],
        ),
        "",
        "User path (LlamaIndex dense ConformalRetriever with monitor=, delta=0.01; alarm_at is 0-based): "
        f"held-out SQuAD in file order (grouped by article) alarm_at={user['held_out_squad_file_order']['alarm_at']}, "
        f"shuffled alarm_at={user['held_out_squad_shuffled']['alarm_at']}; long documents in file order "
        f"alarm_at={user['long_documents_file_order']['alarm_at']}; ConformalMonitor.observe takes "
        f"{user['observe_microseconds']:.1f} µs per query.",
        "",
    ]
    (OUT / "drift_monitor.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
