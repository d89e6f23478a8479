"""``conformal-rag monitor``: calibrate on labelled questions, then replay a stream through a drift monitor.

The calibration questions (SQuAD-style qa JSONL) are run once through the host: their pools
give both the conformal threshold and the monitor's reference statistics. The questions of
the stream file are then asked, in file order, of the framework's ``ConformalRetriever``
with ``monitor=`` attached, exactly as a deployed retriever would be, and the JSON report
says whether and when the alarm fired.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

__all__ = ["read_stream", "register", "run_monitor"]


def register(sub: Any) -> None:
    """Add the ``monitor`` sub-command to the ``conformal-rag`` parser."""
    p = sub.add_parser("monitor", help="calibrate, then replay a stream of questions through a drift monitor")
    p.add_argument("--corpus", action="append", required=True, help="corpus JSONL (repeatable)")
    p.add_argument("--qa", required=True, help="calibration qa JSONL (SQuAD-style)")
    p.add_argument("--stream", required=True, help="JSONL of questions to replay in file order ({'question': ...})")
    p.add_argument("--alpha", type=float, default=0.1, help="target miscoverage of the retriever")
    p.add_argument("--delta", type=float, default=0.01, help="false-alarm probability of the drift alarm")
    p.add_argument("--statistic", choices=["top1", "gap", "set_size"], default="top1")
    p.add_argument("--score", choices=["similarity", "rank", "relative"], default="relative")
    p.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="dense")
    p.add_argument("--framework", choices=["llamaindex", "langchain"], default="llamaindex")
    p.add_argument("--pool-size", type=int, default=50)
    p.add_argument("--seed", type=int, default=0, help="seed of the tie-breaking uniforms")
    p.add_argument("--no-chunking", action="store_true", help="index entries whole")
    p.add_argument("--save-monitor", default=None, help="also write the monitor's state JSON here")
    p.add_argument("--json", dest="json_out", required=True, help="output JSON path")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> None:
    report = run_monitor(
        args.corpus,
        args.qa,
        args.stream,
        alpha=args.alpha,
        delta=args.delta,
        statistic=args.statistic,
        score=args.score,
        retriever=args.retriever,
        framework=args.framework,
        pool_size=args.pool_size,
        seed=args.seed,
        chunking=not args.no_chunking,
        json_out=args.json_out,
        save_monitor=args.save_monitor,
    )
    where = "no alarm" if report["alarm_at"] is None else f"ALARM at query {report['alarm_at']}"
    print(
        f"{report['n_stream']} stream queries, {report['statistic']} statistic, delta={report['delta']}: {where} "
        f"(final martingale {report['martingale'][-1] if report['martingale'] else 1.0})"
    )
    print(f"wrote {args.json_out}")


def read_stream(path: str | Path) -> list[str]:
    """The ``question`` of every line of a JSONL file (qa or questions format), naming file and line on errors.

    Examples
    --------
    >>> read_stream("stream.jsonl")[:1]  # doctest: +SKIP
    ['In what country is Normandy located?']
    """
    from ..calibration.examples import _read_input_jsonl
    from ..core.errors import InputFileError

    rows = _read_input_jsonl(path, "stream")
    out = []
    for lineno, row in rows:
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            got = "is missing" if "question" not in row else "must be a non-empty string"
            raise InputFileError(f"{path}:{lineno}: 'question' {got}.")
        out.append(question)
    if not out:
        raise InputFileError(f"{path}: the stream file holds no questions.")
    return out


def _fingerprint_and_corpus(framework: str, host: Any) -> tuple[Any, dict[str, Any]]:
    from ..calibration.fingerprint import corpus_digest

    if framework == "llamaindex":
        from ..llamaindex.fingerprint import fingerprint_of
        from ..llamaindex.host import all_ids
    else:
        from ..langchain.fingerprint import fingerprint_of
        from ..langchain.host import all_ids
    return fingerprint_of(host), corpus_digest(all_ids(host))


def _conformal_retriever(framework: str, kind: str, host: Any, cal: Any, monitor: Any) -> Any:
    if framework == "llamaindex":
        from ..llamaindex.retriever import ConformalRetriever

        return ConformalRetriever(cal, retriever=host, monitor=monitor)
    from ..langchain.retriever import ConformalRetriever as LCRetriever

    if kind == "dense":
        return LCRetriever(calibration=cal, vectorstore=host, monitor=monitor)
    return LCRetriever(calibration=cal, retriever=host, monitor=monitor)


def run_monitor(
    corpus: Sequence[str | Path],
    qa: str | Path,
    stream: str | Path,
    *,
    alpha: float = 0.1,
    delta: float = 0.01,
    statistic: str = "top1",
    score: str = "relative",
    retriever: str = "dense",
    framework: str = "llamaindex",
    pool_size: int = 50,
    seed: int = 0,
    chunking: bool = True,
    json_out: str | Path | None = None,
    save_monitor: str | Path | None = None,
    client: Any = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Calibrate on ``qa``, replay the questions of ``stream`` in file order and return the report.

    Returns
    -------
    dict
        ``n_stream``, ``alarm_at`` (0-based index of the first alarm, or ``None``),
        ``martingale`` (``M_t`` after each query), ``statistic``, plus ``p_values``,
        ``statistics`` (the raw statistic of each query), ``log_martingale``, ``delta``,
        ``threshold`` (``1/delta``), ``alpha``, ``n_calibration``, ``calibration_threshold``,
        ``framework`` and ``retriever``.

    Raises
    ------
    ConformalError
        Before any indexing: a bad ``alpha``, ``delta`` (outside (0, 1)) or ``pool_size``,
        malformed input files (naming file and line), gold ids missing from the corpus.

    Examples
    --------
    >>> report = run_monitor(["corpus.jsonl"], "cal.jsonl", "stream.jsonl", delta=0.01)  # doctest: +SKIP
    >>> report["alarm_at"]  # doctest: +SKIP
    """
    from ..calibration.examples import load_corpus, load_qa
    from ..calibration.jsonio import encode_float
    from ..calibration.monitor import ConformalMonitor
    from ..calibration.pool_calibration import calibrate_from_pools, collect_observations, label_counts
    from ..core.errors import InputFileError
    from ..core.martingale import check_delta
    from ..core.validation import check_alpha
    from ..local.chroma import chroma_client
    from ..runtime.atomic import atomic_write_text
    from .chunk_corpus import chunk_corpus
    from .hosts import build_host
    from .input_checks import check_at_least, check_distinct_outputs, check_gold_in_corpus, check_outputs

    alpha = check_alpha(alpha)
    delta = check_delta(delta)
    check_at_least("pool_size", pool_size)
    check_at_least("seed", seed, 0)
    check_distinct_outputs({"--json": json_out, "--save-monitor": save_monitor})
    check_outputs(files=[json_out, save_monitor], inputs=[*corpus, qa, stream])
    entries = load_corpus(*corpus)
    if not entries:
        raise InputFileError("The corpus holds no entries.")
    questions = load_qa(qa, answerable_only=True)
    if not questions:
        raise InputFileError(f"{qa}: no answerable questions to calibrate on.")
    stream_questions = read_stream(stream)
    if chunking:
        chunked = chunk_corpus(framework, entries, questions)
        entries, questions = list(chunked.chunks), chunked.questions
    check_gold_in_corpus(questions, {e.id for e in entries}, qa)
    bundle = build_host(framework, retriever, entries, pool_size=pool_size, client=client or chroma_client())
    observations = collect_observations(questions, bundle.fetch, progress=progress)
    fingerprint, digest = _fingerprint_and_corpus(framework, bundle.host)
    cal = calibrate_from_pools(
        observations,
        fingerprint=fingerprint,
        pool_size=pool_size,
        confidence_level=1 - alpha,
        score=score,
        method="split",
        delta=None,
        random_state=seed,
        strict=False,
        labels=label_counts(questions),
    )
    cal = replace(cal, corpus_=digest)
    monitor = ConformalMonitor.from_observations(cal, observations, statistic=statistic, delta=delta, seed=seed)
    conformal = _conformal_retriever(framework, retriever, bundle.host, cal, monitor)
    ask = conformal.invoke if framework == "langchain" else conformal.retrieve
    for question in stream_questions:
        ask(question)
    report = {
        "n_stream": monitor.n_stream,
        "alarm_at": monitor.alarm_at,
        "martingale": [encode_float(m) for m in monitor.martingale],
        "statistic": statistic,
        "statistics": [encode_float(s) for s in monitor.stream],
        "p_values": monitor.p_values,
        "log_martingale": monitor.log_martingale,
        "delta": delta,
        "threshold": monitor.threshold,
        "alpha": alpha,
        "n_calibration": cal.n_calibration_,
        "calibration_threshold": encode_float(cal.threshold_),
        "framework": framework,
        "retriever": retriever,
    }
    if json_out is not None:
        atomic_write_text(json_out, json.dumps(report, indent=2) + "\n")
    if save_monitor is not None:
        monitor.save(save_monitor)
    return report
