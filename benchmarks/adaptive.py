"""Adaptive RAG benchmark: fixed top-k vs the conformal set vs adaptive growth inside it (issue 4).

The bundled SQuAD 2.0 subset is indexed as the demo does (chunked to the MiniLM window, Chroma +
MiniLM), the tuned hybrid BM25 + dense LlamaIndex host is calibrated with
``calibrate_hybrid_retriever`` at ``--alpha`` on a seeded half of the answerable questions, and the
same ``--questions`` test questions (seeded, from the other half) are answered by the local Gemma 3
270M (greedy, the few-shot completion prompt, answers cut at the first newline) with:

* ``top-k``, k in 1, 2, 5, 10, 20: one call with the host's k best chunks, in score order;
* ``conformal set``: one call with every chunk ``ConformalRetriever`` keeps (an empty set abstains);
* ``adaptive (conformal)``: ``AdaptiveContextSynthesizer`` over the conformal set (1, 2, 4, ...
  chunks, one call per round, stop at the first answer that is not "I don't know").

Per strategy: accuracy (``answer_matches``, its default rule: ROUGE-1 F1 > 0.3 or equal normalised
text, against any SQuAD reference) with a Wilson 95% interval, "don't know" rate (``is_no_answer``)
and hallucination rate (an answer that is not "don't know" and does not match) separately, prompt and
completion tokens per question as the LLM reports them, LLM calls per question, mean chunks shown,
whether the gold chunk was shown, and for the conformal strategies the retrieval coverage (gold chunk
in the set). The headline ratio (Pathway reports about 4x fewer tokens than fixed top-k at about equal
accuracy) is the prompt tokens of the fixed top-k whose accuracy is closest to adaptive's, among
those not above it by more than noise (1.96 standard errors of the paired per-question difference),
divided by adaptive's prompt tokens; also the full conformal set's tokens over adaptive's.

When ``openai_settings()`` finds OpenAI or an OpenAI-compatible server configured, the same questions
also go through ``default_llm(temperature=0)``; otherwise that run is skipped and the output says so.
Every LLM output is cached (``SampleCache`` under ``default_cache_dir()``), so a rerun is fast.
Writes ``benchmarks/results/adaptive.json`` (config, environment, per-strategy rows, per-question
records) and ``benchmarks/results/adaptive.md``.

Usage::

    .venv/bin/python benchmarks/adaptive.py [--questions 60] [--alpha 0.1] [--seed 0] [--max-new-tokens 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.adaptive_schedule import is_no_answer
from conformal_rag_plugins.core.generation_scores import answer_matches
from conformal_rag_plugins.retrieval.options import RetrievalOptions

HERE = Path(__file__).resolve().parent
FIXED_K = (1, 2, 5, 10, 20)
CONFORMAL = "conformal set"
ADAPTIVE = "adaptive (conformal)"
Z95 = 1.959963984540054


def fixed_name(k: int) -> str:
    """Strategy name of fixed top-k."""
    return f"top-{k}"


# ----------------------------------------------------------------------------- pure helpers


@dataclass(frozen=True)
class Outcome:
    """One strategy's result on one question.

    ``gold_in_set`` is whether the conformal set holds a gold chunk (``None`` for fixed top-k);
    ``gold_shown`` whether a gold chunk was in the context of the final call.
    """

    answer: str
    correct: bool
    no_answer: bool
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    chunks: int
    gold_shown: bool
    gold_in_set: bool | None = None
    failed_calls: int = 0


def make_outcome(
    answer: str,
    references: Sequence[str],
    gold_ids: Sequence[str],
    shown_ids: Sequence[str],
    *,
    prompt_tokens: int,
    completion_tokens: int,
    llm_calls: int,
    failed_calls: int = 0,
    gold_in_set: bool | None = None,
) -> Outcome:
    """Score one answer: ``answer_matches`` (default rule) against the references, ``is_no_answer``.

    Examples
    --------
    >>> o = make_outcome("in Paris", ["Paris"], ["d#0"], ["d#1", "d#0"], prompt_tokens=9,
    ...                  completion_tokens=2, llm_calls=1)
    >>> o.correct, o.no_answer, o.chunks, o.gold_shown
    (True, False, 2, True)
    """
    gold = set(gold_ids)
    return Outcome(
        answer=answer,
        correct=answer_matches(answer, references),
        no_answer=is_no_answer(answer),
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        llm_calls=int(llm_calls),
        chunks=len(shown_ids),
        gold_shown=any(s in gold for s in shown_ids),
        gold_in_set=gold_in_set,
        failed_calls=int(failed_calls),
    )


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (``(0, 1)`` when ``n == 0``).

    Examples
    --------
    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def aggregate(outcomes: Sequence[Outcome], z: float = Z95) -> dict[str, Any]:
    """Per-strategy summary of per-question outcomes.

    ``dont_know_rate`` counts answers that decline; ``hallucination_rate`` answers that do not
    decline and do not match. ``set_coverage`` is ``None`` unless every outcome has ``gold_in_set``.
    """
    n = len(outcomes)
    correct = sum(o.correct for o in outcomes)
    low, high = wilson_interval(correct, n, z)
    in_set = [o.gold_in_set for o in outcomes]
    return {
        "n": n,
        "accuracy": correct / n if n else float("nan"),
        "accuracy_low": low,
        "accuracy_high": high,
        "dont_know_rate": _mean([float(o.no_answer) for o in outcomes]),
        "hallucination_rate": _mean([float(not o.no_answer and not o.correct) for o in outcomes]),
        "prompt_tokens": _mean([o.prompt_tokens for o in outcomes]),
        "completion_tokens": _mean([o.completion_tokens for o in outcomes]),
        "llm_calls": _mean([o.llm_calls for o in outcomes]),
        "chunks": _mean([o.chunks for o in outcomes]),
        "gold_shown": _mean([float(o.gold_shown) for o in outcomes]),
        "set_coverage": _mean([float(bool(g)) for g in in_set]) if n and None not in in_set else None,
        "failed_calls": sum(o.failed_calls for o in outcomes),
    }


def paired_noise(a: Sequence[bool], b: Sequence[bool], z: float = Z95) -> float:
    """``z`` standard errors of the mean paired difference ``a_i - b_i`` (0 when ``n < 2``).

    Examples
    --------
    >>> paired_noise([True, False, True, True], [True, False, True, True])
    0.0
    >>> round(paired_noise([True, True, False, False], [True, False, False, True]), 3)
    0.8
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    n = len(a)
    if n < 2:
        return 0.0
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    return z * math.sqrt(var / n)


def closest_fixed(
    correct: Mapping[str, Sequence[bool]],
    prompt_tokens: Mapping[str, float],
    fixed: Sequence[str],
    target: str,
    z: float = Z95,
) -> dict[str, Any] | None:
    """The fixed strategy whose accuracy is closest to ``target``'s, not above it by more than noise.

    A fixed strategy is eligible when its accuracy minus the target's is at most
    :func:`paired_noise` of the two on the same questions. Among eligible ones the smallest
    absolute accuracy gap wins; ties go to the one with fewer prompt tokens (the choice least
    favourable to the target's token saving). ``None`` when no fixed strategy is eligible.

    Returns
    -------
    dict or None
        ``{"strategy", "accuracy", "target_accuracy", "gap", "noise"}``.

    Examples
    --------
    >>> correct = {"top-1": [1, 0, 0, 0], "top-5": [1, 1, 0, 0], "ad": [1, 1, 0, 0]}
    >>> closest_fixed(correct, {"top-1": 100, "top-5": 500, "ad": 150}, ["top-1", "top-5"], "ad")["strategy"]
    'top-5'
    """
    target_acc = _mean([float(c) for c in correct[target]])
    best: tuple[float, float, str] | None = None
    details: dict[str, tuple[float, float]] = {}
    for name in fixed:
        acc = _mean([float(c) for c in correct[name]])
        noise = paired_noise(correct[name], correct[target], z)
        details[name] = (acc, noise)
        if acc - target_acc > noise + 1e-12:
            continue
        key = (abs(acc - target_acc), float(prompt_tokens[name]), name)
        if best is None or key < best:
            best = key
    if best is None:
        return None
    acc, noise = details[best[2]]
    return {
        "strategy": best[2],
        "accuracy": acc,
        "target_accuracy": target_acc,
        "gap": acc - target_acc,
        "noise": noise,
    }


def token_ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, ``None`` when the denominator is not positive."""
    return numerator / denominator if denominator > 0 else None


def headline_ratios(
    rows: Mapping[str, Mapping[str, Any]],
    correct: Mapping[str, Sequence[bool]],
    fixed: Sequence[str],
    *,
    adaptive: str = ADAPTIVE,
    conformal: str = CONFORMAL,
    z: float = Z95,
) -> dict[str, Any]:
    """Prompt-token ratios against the adaptive strategy (Pathway's headline and ours).

    ``vs_matched_fixed`` is the prompt tokens of :func:`closest_fixed` over adaptive's;
    ``vs_conformal`` the full conformal set's over adaptive's; ``vs_each`` every strategy's.
    """
    tokens = {name: float(row["prompt_tokens"]) for name, row in rows.items()}
    matched = closest_fixed(correct, tokens, fixed, adaptive, z)
    base = tokens[adaptive]
    return {
        "matched_fixed": matched,
        "vs_matched_fixed": None if matched is None else token_ratio(tokens[matched["strategy"]], base),
        "vs_conformal": token_ratio(tokens[conformal], base) if conformal in tokens else None,
        "vs_each": {name: token_ratio(t, base) for name, t in tokens.items()},
    }


def display_rows(rows: Mapping[str, Mapping[str, Any]], ratios: Mapping[str, Any]) -> list[dict[str, str]]:
    """Rows of the markdown table (rounded, as strings)."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    out = []
    for name, r in rows.items():
        ratio = ratios["vs_each"].get(name)
        out.append(
            {
                "strategy": name,
                "accuracy [95% CI]": f"{r['accuracy']:.2f} [{r['accuracy_low']:.2f}, {r['accuracy_high']:.2f}]",
                "don't know": pct(r["dont_know_rate"]),
                "hallucination": pct(r["hallucination_rate"]),
                "prompt tok/q": f"{r['prompt_tokens']:.0f}",
                "completion tok/q": f"{r['completion_tokens']:.1f}",
                "calls/q": f"{r['llm_calls']:.2f}",
                "chunks/q": f"{r['chunks']:.2f}",
                "gold shown": pct(r["gold_shown"]),
                "set coverage": pct(r["set_coverage"]),
                "prompt tok ÷ adaptive": "-" if ratio is None else f"{ratio:.2f}",
            }
        )
    return out


def ratio_lines(ratios: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The headline ratio sentences for the markdown report."""
    ad = rows[ADAPTIVE]
    lines = []
    m = ratios["matched_fixed"]
    if m is None:
        lines.append(
            f"- Every fixed top-k is more accurate than adaptive ({ad['accuracy']:.2f}) by more than noise: "
            "no accuracy-matched token ratio."
        )
    else:
        lines.append(
            f"- **Fixed top-k at matched accuracy / adaptive: {ratios['vs_matched_fixed']:.2f}x prompt tokens** "
            f"({m['strategy']}: accuracy {m['accuracy']:.2f}, {rows[m['strategy']]['prompt_tokens']:.0f} tokens/q; "
            f"adaptive: {m['target_accuracy']:.2f}, {ad['prompt_tokens']:.0f} tokens/q; gap {m['gap']:+.2f}, "
            f"paired noise ±{m['noise']:.2f}). Pathway reports about 4x."
        )
    if ratios["vs_conformal"] is not None:
        cs = rows[CONFORMAL]
        lines.append(
            f"- **Full conformal set / adaptive: {ratios['vs_conformal']:.2f}x prompt tokens** (accuracy "
            f"{cs['accuracy']:.2f} vs {ad['accuracy']:.2f}; {cs['chunks']:.2f} vs {ad['chunks']:.2f} chunks shown)."
        )
    return lines


# ----------------------------------------------------------------------------- the run


def _setup(args: argparse.Namespace) -> tuple[Any, Any, list[Any], list[Any], dict[str, Any]]:
    """Index the chunked corpus, calibrate the tuned hybrid, pick the test questions."""
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
    from conformal_rag_plugins.commands.hosts import corpus_key
    from conformal_rag_plugins.datasets.examples import split_examples
    from conformal_rag_plugins.llamaindex import calibrate_hybrid_retriever
    from conformal_rag_plugins.local.chroma import chroma_client
    from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index

    t0 = time.perf_counter()
    chunked = chunk_corpus("llamaindex", list(bundled_corpus()), list(bundled_questions(True)))
    entries, questions = list(chunked.chunks), chunked.questions
    client = chroma_client(args.chroma_dir) if args.chroma_dir else chroma_client()
    index, nodes = build_chroma_index(entries, client=client, collection_name=f"crp-llamaindex-{corpus_key(entries)}")
    cal_q, test_half = split_examples(questions, (0.5, 0.5), seed=args.seed)
    print(f"Indexed {len(entries)} chunks in {time.perf_counter() - t0:.0f}s; calibrating on {len(cal_q)}...")
    host, cal = calibrate_hybrid_retriever(
        index,
        nodes,
        cal_q,
        confidence_level=1 - args.alpha,
        pool_size=args.pool,
        options=RetrievalOptions(random_state=args.seed, progress=False),
    )
    test_q = split_examples(test_half, (1.0,), seed=args.seed)[0][: args.questions]
    info = {
        "n_chunks": len(entries),
        "chunking": chunked.report(),
        "n_calibration": len(cal_q),
        "n_test_half": len(test_half),
        "n_test": len(test_q),
        "fusion": f"{cal.selection_['fusion_method']}:{cal.selection_['dense_weight']:g}",
        "score_family": cal.score_family_,
        "threshold": cal.threshold_,
        "summary": cal.summary(),
    }
    print(f"  chosen: fusion {info['fusion']}, score {cal.score_family_}; {cal.summary()}")
    return host, cal, test_q, list(test_half), info


def _test_half_coverage(retriever: Any, questions: Sequence[Any]) -> dict[str, float]:
    """Retrieval coverage and mean set size of the conformal set on the whole test half (no LLM)."""
    covered, sizes = [], []
    for ex in questions:
        ids = [n.node.node_id for n in retriever.retrieve(ex.question)]
        covered.append(any(i in ex.gold_ids for i in ids))
        sizes.append(len(ids))
    return {"n": len(questions), "coverage": _mean(covered), "mean_set_size": _mean(sizes)}


class _CountingCache:
    """A ``SampleCache`` wrapper that counts hits and misses (fresh LLM calls)."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        got = self.cache.get(key)
        if got is None:
            self.misses += 1
        else:
            self.hits += 1
        return got

    def put(self, key: str, samples: Any) -> None:
        self.cache.put(key, samples)


def _sample_outcome(
    sample: Any, refs: Sequence[str], gold_ids: Sequence[str], shown: Sequence[str], gold_in_set: bool | None = None
) -> Outcome:
    """Outcome of a single-call strategy from its ``Sample``."""
    return make_outcome(
        sample.text,
        refs,
        gold_ids,
        shown,
        prompt_tokens=sample.prompt_tokens,
        completion_tokens=sample.completion_tokens,
        llm_calls=1,
        failed_calls=int(sample.failed),
        gold_in_set=gold_in_set,
    )


async def _run_llm(
    label: str, llm: Any, host: Any, retriever: Any, questions: Sequence[Any], cache: _CountingCache, timeout: float
) -> tuple[dict[str, list[Outcome]], list[dict[str, Any]]]:
    """Answer every question with every strategy; return outcomes per strategy and per-question records."""
    from llama_index.core.schema import MetadataMode

    from conformal_rag_plugins import AdaptiveSchedule, SamplingOptions
    from conformal_rag_plugins.answer_sets.adaptive_context import join_chunks
    from conformal_rag_plugins.answer_sets.prompts import IDK
    from conformal_rag_plugins.llamaindex import AdaptiveContextSynthesizer
    from conformal_rag_plugins.llamaindex.answer_sampler import LlamaIndexSampler
    from conformal_rag_plugins.llamaindex.host import pool_from_nodes

    sampler = LlamaIndexSampler(llm, n_samples=1, max_concurrency=1, timeout=timeout, cache=cache)  # type: ignore[arg-type]
    synth = AdaptiveContextSynthesizer(
        llm,  # type: ignore[arg-type]
        sampling=SamplingOptions(timeout=timeout, cache=cache),  # type: ignore[arg-type]
        schedule=AdaptiveSchedule(initial=1, factor=2.0),
    )
    outcomes: dict[str, list[Outcome]] = {fixed_name(k): [] for k in FIXED_K} | {CONFORMAL: [], ADAPTIVE: []}
    records: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i, ex in enumerate(questions):
        gold = set(ex.gold_ids)
        pool = pool_from_nodes(host.retrieve(ex.question))[1]
        texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in pool]
        ids = [n.node.node_id for n in pool]
        conf_nodes = retriever.retrieve(ex.question)
        conf_ids = [n.node.node_id for n in conf_nodes]
        in_set = any(c in gold for c in conf_ids)

        refs, gold_ids = ex.answers, ex.gold_ids
        got: dict[str, Outcome] = {}
        for k in FIXED_K:
            s = (await sampler.asample(ex.question, join_chunks(texts[:k])))[0]
            got[fixed_name(k)] = _sample_outcome(s, refs, gold_ids, ids[:k])
        conf_texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in conf_nodes]
        if conf_texts:
            s = (await sampler.asample(ex.question, join_chunks(conf_texts)))[0]
            got[CONFORMAL] = _sample_outcome(s, refs, gold_ids, conf_ids, gold_in_set=in_set)
        else:  # an empty set abstains with no call, as the synthesizers do
            got[CONFORMAL] = make_outcome(
                IDK, refs, gold_ids, [], prompt_tokens=0, completion_tokens=0, llm_calls=0, gold_in_set=in_set
            )
        meta = (await synth.asynthesize(ex.question, conf_nodes)).metadata or {}
        got[ADAPTIVE] = make_outcome(
            str(meta["answer"]),
            refs,
            gold_ids,
            list(meta["chunk_ids"]),
            prompt_tokens=meta["prompt_tokens"],
            completion_tokens=meta["completion_tokens"],
            llm_calls=meta["llm_calls"],
            failed_calls=sum(bool(r["failed"]) for r in meta["history"]),
            gold_in_set=in_set,
        )
        for name, o in got.items():
            outcomes[name].append(o)
        records.append(
            {
                "id": ex.id,
                "question": ex.question,
                "answers": list(ex.answers),
                "gold_ids": sorted(gold),
                "top_ids": ids[: max(FIXED_K)],
                "conformal_ids": conf_ids,
                "adaptive_schedule": meta["schedule"],
                "adaptive_round_answers": meta["round_answers"],
                "adaptive_token_source": meta["token_source"],
                "strategies": {name: asdict(o) for name, o in got.items()},
            }
        )
        done = {name: sum(o.correct for o in v) for name, v in outcomes.items()}
        print(
            f"[{label} {i + 1}/{len(questions)}] {time.perf_counter() - t0:.0f}s, fresh calls {cache.misses}: "
            f"set {len(conf_ids)}, adaptive {meta['rounds']} round(s) -> {got[ADAPTIVE].answer!r} "
            f"({'ok' if got[ADAPTIVE].correct else 'wrong'}); correct so far "
            + ", ".join(f"{n} {c}" for n, c in done.items()),
            flush=True,
        )
    return outcomes, records


def _environment(args: argparse.Namespace) -> dict[str, Any]:
    import importlib.metadata as md

    versions = {}
    for pkg in ("llama_cpp_python", "llama-index-core", "chromadb", "conformal-rag-plugins"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {
        "machine": f"{platform.machine()} {platform.system()} Python {platform.python_version()}",
        "cpus": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "versions": versions,
    }


def _run_section(label: str, llm_info: dict[str, Any], outcomes: dict[str, list[Outcome]]) -> dict[str, Any]:
    rows = {name: aggregate(v) for name, v in outcomes.items()}
    correct = {name: [o.correct for o in v] for name, v in outcomes.items()}
    ratios = headline_ratios(rows, correct, [fixed_name(k) for k in FIXED_K])
    return {"label": label, "llm": llm_info, "rows": rows, "ratios": ratios}


def _markdown(report: dict[str, Any]) -> str:
    cfg, setup = report["config"], report["setup"]
    cov = setup["test_half_coverage"]
    md = [
        "# Adaptive RAG inside the conformal set vs fixed top-k",
        "",
        f"Bundled SQuAD 2.0 subset, chunked ({setup['n_chunks']} chunks), tuned hybrid LlamaIndex host "
        f"(fusion {setup['fusion']}, score `{setup['score_family']}`) calibrated at alpha={cfg['alpha']} on "
        f"{setup['n_calibration']} questions; the same {setup['n_test']} seeded test questions (seed {cfg['seed']}) "
        f"for every strategy. On the whole test half ({cov['n']} questions) the conformal set covers "
        f"{cov['coverage']:.3f} with {cov['mean_set_size']:.2f} chunks on average.",
        "",
        "Greedy decoding, few-shot completion prompt, one LLM call per round, at most "
        f"{cfg['max_new_tokens']} new tokens. Accuracy: `answer_matches` default rule (ROUGE-1 F1 > 0.3 or equal "
        'normalised text, any reference), Wilson 95% interval. "Don\'t know": `is_no_answer`; hallucination: an '
        "answer that is not \"don't know\" and does not match. Tokens are the LLM's reported usage, per question "
        "(adaptive: summed over rounds). Gold shown: a gold chunk was in the final call's context; set coverage: "
        "in the conformal set.",
    ]
    for run in report["runs"]:
        md += ["", f"## {run['label']} ({run['llm']['model']})", ""]
        md.append(
            markdown_table(
                display_rows(run["rows"], run["ratios"]),
                [
                    "strategy",
                    "accuracy [95% CI]",
                    "don't know",
                    "hallucination",
                    "prompt tok/q",
                    "completion tok/q",
                    "calls/q",
                    "chunks/q",
                    "gold shown",
                    "set coverage",
                    "prompt tok ÷ adaptive",
                ],
            )
        )
        md += ["", *ratio_lines(run["ratios"], run["rows"])]
        md.append(
            f"- Wall time {run['seconds']:.0f}s, {run['fresh_calls']} fresh LLM calls, {run['cached_calls']} from the "
            f"cache, {sum(r['failed_calls'] for r in run['rows'].values())} failed calls."
        )
    for note in report["skipped"]:
        md += ["", f"Skipped: {note}"]
    return "\n".join(md) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=60, help="test questions (seeded, from the test half)")
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool", type=int, default=50, help="host candidate pool")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--n-ctx", type=int, default=8192, help="local LLM context window (tokens)")
    parser.add_argument("--threads", type=int, default=2, help="local LLM threads")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per LLM call")
    parser.add_argument("--chroma-dir", type=Path, default=None, help="persistent Chroma dir (default: in memory)")
    parser.add_argument("--no-openai", action="store_true", help="skip the OpenAI run even when configured")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
    from conformal_rag_plugins.llamaindex import ConformalRetriever
    from conformal_rag_plugins.llamaindex.answer_sampler import model_id
    from conformal_rag_plugins.local.encoder import default_cache_dir
    from conformal_rag_plugins.local.llamaindex_models import default_llm, local_llm
    from conformal_rag_plugins.runtime.openai_settings import openai_settings

    started = time.perf_counter()
    env = _environment(args)
    host, cal, test_q, test_half, setup = _setup(args)
    retriever = ConformalRetriever(retriever=host, calibration=cal)
    setup["test_half_coverage"] = _test_half_coverage(retriever, test_half)
    print(f"  test half: {setup['test_half_coverage']}")
    # max_new_tokens is not part of the sample cache key, so it names the cache file.
    cache_path = default_cache_dir() / f"adaptive_benchmark_{args.max_new_tokens}tok.sqlite"
    llms: list[tuple[str, Any, dict[str, Any]]] = [
        (
            "local",
            local_llm(temperature=0.0, max_new_tokens=args.max_new_tokens, n_threads=args.threads, n_ctx=args.n_ctx),
            {"n_ctx": args.n_ctx, "threads": args.threads, "max_new_tokens": args.max_new_tokens},
        )
    ]
    skipped = []
    settings = openai_settings()
    if settings is None:
        skipped.append("OpenAI run: openai_settings() found no OPENAI_API_KEY / OPENAI_BASE_URL.")
    elif args.no_openai:
        skipped.append("OpenAI run: --no-openai.")
    else:
        llms.append(("openai", default_llm(temperature=0.0), {"base_url": settings.get("base_url")}))
    for note in skipped:
        print(f"Skipped: {note}")

    runs, records = [], {}
    for label, llm, extra in llms:
        cache = _CountingCache(SampleCache(cache_path))
        t0 = time.perf_counter()
        outcomes, recs = asyncio.run(_run_llm(label, llm, host, retriever, test_q, cache, args.timeout))
        info = {"model": model_id(llm), "temperature": 0.0, "chat": bool(llm.metadata.is_chat_model), **extra}
        run = _run_section(label, info, outcomes)
        run |= {"seconds": time.perf_counter() - t0, "fresh_calls": cache.misses, "cached_calls": cache.hits}
        runs.append(run)
        records[label] = recs
    report = {
        "config": {
            "alpha": args.alpha,
            "seed": args.seed,
            "questions": args.questions,
            "pool_size": args.pool,
            "fixed_k": list(FIXED_K),
            "adaptive": {"initial": 1, "factor": 2.0},
            "max_new_tokens": args.max_new_tokens,
            "match_rule": "answer_matches(match='rouge1', threshold=0.3)",
            "noise": "1.96 x standard error of the paired per-question accuracy difference",
            "cache": str(cache_path),
        },
        "environment": env,
        "setup": setup,
        "skipped": skipped,
        "runs": runs,
        "seconds": time.perf_counter() - started,
        "questions": records,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "adaptive.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    md = _markdown(report)
    (args.out / "adaptive.md").write_text(md)
    print(md)
    print(f"Total wall time {report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
