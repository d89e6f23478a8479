"""``conformal-rag monitor``: replay a stream of questions through a drift monitor tied to one calibration.

The calibration is deployed (``--calibration``: host rebuilt from corpus and fingerprint, refused
unless identical) or made here from the answerable ``--qa`` questions. The label-free reference
is *every* ``--qa`` question, answerable or not: a live stream cannot be filtered on a label, so
neither is the reference. Stream questions go, in order, through the framework's
``ConformalRetriever`` with ``ServingOptions(monitor=...)``, as when deployed; a hybrid host's monitor
watches the dense similarities behind the fusion instead (``monitor_scores.py``). ``--resume``
continues a ``--save-monitor`` state with the calibration it carries (or ``--calibration``, which must
be that one); ``--save-monitor`` without ``--calibration`` also saves the calibration made here, after
the state, so a run killed between the two files leaves a state that still resumes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..retrieval.serving import ServingOptions
from .cli_help import AS_CALIBRATE, add_chunk_options, command, request_from
from .framework_registry import FRAMEWORKS
from .input_checks import (
    announce_questions,
    check_at_least,
    check_gold_in_corpus,
    check_output_options,
    check_pool_option,
    read_questions,
)
from .levels import GivenStore, add_confidence_level
from .monitor_calibration import DEFAULTS, Here, calibrate_here, deployed_options, refuse_disagreeing
from .monitor_questions import read_stream
from .monitor_scores import MONITOR_SCORES, dense_feed, score_source


def register(sub: Any) -> None:
    """Add the ``monitor`` sub-command to the ``conformal-rag`` parser."""
    p = command(
        sub,
        "monitor",
        "replay a stream of questions through a drift monitor of a calibration (made here or deployed)",
        "conformal-rag monitor --corpus corpus.jsonl --calibration calibration.json --qa reference.jsonl "
        "--stream queries.jsonl --out monitor.json",
        handler=_handle,
    )
    p.add_argument("--corpus", action="append", required=True, help="corpus JSONL (repeatable)")
    p.add_argument(
        "--qa",
        "--questions",
        dest="qa",
        default=None,
        help="questions of the monitor's label-free reference: every line's question, answerable or not; without "
        "--calibration its answerable questions also calibrate (SQuAD-style or labelled lines); not with --resume",
    )
    p.add_argument("--stream", required=True, help="JSONL of questions to replay in file order ({'question': ...})")
    p.add_argument(
        "--calibration",
        default=None,
        metavar="CAL",
        help="monitor this saved calibration (from calibrate or --save-calibration; signed if "
        "$CONFORMAL_RAG_SIGNING_KEY is set) on the host rebuilt from --corpus and its fingerprint, instead of "
        "calibrating on --qa (default: none, calibrate here)",
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="STATE",
        help="continue a state written by --save-monitor (it holds its calibration, the reference, delta, "
        "statistic and seed; a --calibration given must be the state's) (default: none, a new monitor)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=None,
        action=GivenStore,
        help="target miscoverage when calibrating here (default 0.1)",
    )
    add_confidence_level(p, default="0.9 when calibrating here")
    p.add_argument(
        "--delta", type=float, default=None, help="false-alarm probability of the drift alarm (default 0.01)"
    )
    p.add_argument(
        "--statistic",
        choices=["top1", "gap", "set_size"],
        default=None,
        help="label-free statistic of each query: the best host score, best minus second best, or the conformal "
        "set's size (default top1)",
    )
    p.add_argument(
        "--monitor-scores",
        choices=MONITOR_SCORES,
        default=None,
        help="whose scores the statistic is taken from: the served pool, or the raw dense similarities behind a "
        "hybrid host's fusion, whose fused scores are normalised per query and cannot show a shift (default auto: "
        "dense for a hybrid host, served otherwise; a --resume state fixes it)",
    )
    p.add_argument(
        "--score",
        choices=["auto", "similarity", "rank", "relative"],
        default=None,
        help="score family when calibrating here (default: auto for the tuned hybrid, else relative, as calibrate)",
    )
    p.add_argument(
        "--retriever",
        choices=["dense", "bm25", "hybrid"],
        default=None,
        help="host when calibrating here (default hybrid, as calibrate; it was dense before)",
    )
    p.add_argument(
        "--fusion",
        default=None,
        help="'tuned' or METHOD:WEIGHT such as zscore:0.5 (hybrid only; default tuned, as calibrate)",
    )
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default=None,
        help="whose splitter and index (default llamaindex)",
    )
    p.add_argument("--pool-size", type=int, default=None, help="candidates retrieved per question (default 50)")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the calibration split and of the monitor's tie-breaking uniforms (default 0)",
    )
    add_chunk_options(p, *AS_CALIBRATE, whole="index entries whole")
    p.add_argument("--save-monitor", default=None, help="also write the monitor's state JSON here (default: none)")
    p.add_argument(
        "--save-calibration",
        default=None,
        help="write the calibration made here, for report and serving (default with --save-monitor and no "
        "--calibration: the state's path with .calibration.json)",
    )
    p.add_argument("--out", "--json", dest="json_out", required=True, metavar="FILE", help="report JSON to write")


def _handle(args: argparse.Namespace) -> None:
    report = run_monitor(request_from(MonitorRequest, args, chunking=not args.no_chunking))
    # queries are counted from 1 here (the JSON's alarm_at is the 0-based index; alarm_query counts from 1)
    where = "no alarm" if report["alarm_at"] is None else f"ALARM at query {report['alarm_at'] + 1}"
    resumed = f" ({report['n_stream_new']} new after {report['n_stream'] - report['n_stream_new']} resumed)"
    print(
        f"{report['n_stream']} stream queries{resumed if report['resumed_from'] else ''}, {report['statistic']} "
        f"statistic of the {report['score_source']} scores, delta={report['delta']}, reference of "
        f"{report['n_reference']} questions: {where} "
        f"(final martingale {report['martingale'][-1] if report['martingale'] else 1.0}, alarm level "
        f"1/delta = {report['threshold']:g})"
    )
    for path in (args.json_out, args.save_monitor, report["saved_calibration"]):
        if path is not None:
            print(f"wrote {path}")


@dataclass(frozen=True)
class MonitorRequest:
    """The options of ``conformal-rag monitor`` (see :func:`run_monitor`).

    ``None`` means "not given": the calibration or the resumed state fixes it, else :data:`DEFAULTS`.

    Examples
    --------
    >>> request = MonitorRequest(["corpus.jsonl"], "cal.jsonl", "stream.jsonl", delta=0.01)
    >>> request.statistic is None, request.chunking
    (True, True)
    """

    corpus: Sequence[str | Path]
    qa: str | Path | None
    stream: str | Path
    alpha: float | None = None
    delta: float | None = None
    statistic: str | None = None
    score: str | None = None
    retriever: str | None = None
    framework: str | None = None
    pool_size: int | None = None
    seed: int | None = None
    chunking: bool = True
    json_out: str | Path | None = None
    save_monitor: str | Path | None = None
    calibration: str | Path | None = None
    resume: str | Path | None = None
    fusion: str | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    save_calibration: str | Path | None = None
    monitor_scores: str | None = None


def run_monitor(request: MonitorRequest, *, client: Any = None, progress: bool = False) -> dict[str, Any]:
    """Monitor a calibration (made here from ``qa``, or ``calibration``) on the questions of ``stream``.

    Request fields that need a word:

    - ``qa``: every question is the monitor's reference; without ``calibration`` its answerable
      ones also calibrate (tuned hybrid). ``None`` only with ``resume``.
    - ``alpha``, ``score``, ``retriever``, ``fusion``, ``framework``, ``pool_size``: as ``calibrate``
      (0.1, auto/relative, hybrid, tuned, llamaindex, 50); with ``calibration`` a differing value is refused.
    - ``delta``, ``statistic``, ``seed``: the monitor's (0.01, top1, 0); ``resume`` fixes them.
    - ``calibration``: a retrieval or answer-set calibration (its retrieval stage is monitored).
    - ``resume``: needs ``calibration`` and refuses another calibration's state.
    - ``save_calibration``: defaults to ``save_monitor`` + ``.calibration.json`` without ``calibration``.
    - ``monitor_scores``: ``auto`` (default: ``dense`` for a hybrid host, ``served`` otherwise), ``served``
      or ``dense`` (the dense similarities behind a hybrid host's fusion); ``resume`` fixes it.

    Returns
    -------
    dict
        ``n_stream`` (resumed queries included), ``alarm_at`` (0-based first alarm or ``None``),
        ``alarm_query`` (the same query counted from 1, as the printed line counts),
        ``martingale``, ``statistic``, ``p_values``, ``statistics``, ``log_martingale``, ``delta``,
        ``threshold`` (``1/delta``), ``alpha``, ``n_calibration``, ``calibration_threshold``,
        ``framework``, ``retriever``, ``n_reference``, ``n_stream_new``, ``resumed_from``,
        ``calibration_source`` (``"file"``/``"calibrated"``), ``calibration_file``,
        ``saved_calibration``, ``fusion``, ``score``, ``pool_size``, ``seed``, ``score_source`` (whose scores
        the statistic is taken from: ``"served"`` or ``"dense"``).

    Raises
    ------
    ConformalError
        Before indexing: bad or disagreeing options, an output that is an input, malformed files,
        a tampered/unsigned calibration or state, another calibration's state, unknown gold ids.
        After: a rebuilt host that is not the calibration's (``FingerprintMismatchError``).
    """
    from ..core.errors import ConformalError, InputFileError
    from ..core.martingale import check_delta
    from ..core.validation import check_alpha
    from ..datasets.examples import load_corpus
    from ..local.chroma import chroma_client
    from ..monitor.monitor import ConformalMonitor
    from ..runtime.atomic import atomic_write_text
    from ..storage.jsonio import encode_float
    from .chunk_corpus import chunk_corpus
    from .framework_registry import get_framework
    from .hosts import build_host
    from .levels import confidence_level_of
    from .report import load_any_calibration
    from .report_host import host_spec, rebuild_host

    r = request
    alpha = None if r.alpha is None else check_alpha(r.alpha)
    delta = None if r.delta is None else check_delta(r.delta)
    framework, seed, fusion, save_calibration = r.framework, r.seed, r.fusion, r.save_calibration
    if r.pool_size is not None:
        check_pool_option("pool_size", r.pool_size)
    if seed is not None:
        check_at_least("seed", seed, 0)
    if r.resume is not None and r.qa is not None:
        raise ConformalError("--qa is not used with --resume: the saved state holds the reference; leave --qa out.")
    if r.resume is None and r.qa is None:
        raise ConformalError("--qa is required: its questions are the monitor's reference (unless --resume).")
    if r.calibration is not None and save_calibration is not None:
        raise ConformalError("--save-calibration writes a calibration made here; with --calibration there is none.")
    if save_calibration is None and r.save_monitor is not None and r.calibration is None and r.resume is None:
        save_calibration = Path(r.save_monitor).with_suffix(".calibration.json")
    check_output_options(
        {"--json": r.json_out, "--save-monitor": r.save_monitor, "--save-calibration": save_calibration},
        inputs=[*r.corpus, r.qa, r.stream, r.calibration, r.resume],
    )
    stream_questions = read_stream(r.stream)
    question_file = read_questions(r.qa, "qa") if r.qa is not None else None

    monitor = None
    deployed = bundle = None
    labelled: list[Any] = []
    if r.calibration is not None or r.resume is not None:
        if r.calibration is not None:
            loaded = load_any_calibration(r.calibration)
            deployed = loaded.retrieval_stage() if hasattr(loaded, "retrieval_stage") else loaded
            where = f"--calibration {r.calibration}"
        else:  # the state carries the calibration it was made with
            deployed = ConformalMonitor.saved_calibration(r.resume)
            where = f"the calibration of --resume {r.resume}"
        spec = host_spec(deployed)
        given = {"alpha": alpha, "framework": framework, "retriever": r.retriever, "pool_size": r.pool_size}
        given |= {"score": r.score, "fusion": fusion}
        refuse_disagreeing(given, deployed_options(deployed, spec, r.score, fusion), where)
        if r.resume is not None:
            monitor = ConformalMonitor.load(r.resume, deployed)
            stored = {"delta": monitor.delta, "statistic": monitor.statistic, "seed": monitor.seed}
            refuse_disagreeing({"delta": delta, "statistic": r.statistic, "seed": seed}, stored, f"--resume {r.resume}")
        framework = spec[0]
        reference = [q.question for q in question_file.examples] if question_file is not None else []
    else:
        framework = framework or DEFAULTS["framework"]
        assert question_file is not None  # refused above when both qa and resume are missing
        labelled = question_file.labelled()  # answerable, each with gold (SQuAD-style or labelled lines)
        if not labelled:
            raise InputFileError(f"{r.qa}: no answerable questions to calibrate on.")
        reference = [q.question for q in question_file.examples]  # every question, answerable or not
        fusion = fusion or DEFAULTS["fusion"]
        if (r.retriever or DEFAULTS["retriever"]) == "hybrid" and fusion != "tuned":
            from ..tuning.tuned_calibration import FusionConfig

            FusionConfig.parse(fusion)  # a bad value fails here, not after indexing
    entries = load_corpus(*r.corpus)
    if not entries:
        raise InputFileError("The corpus holds no entries.")
    if r.chunking:
        chunked = chunk_corpus(framework, entries, labelled, chunk_size=r.chunk_size, chunk_overlap=r.chunk_overlap)
        chunks, labelled = list(chunked.chunks), chunked.questions
    else:
        chunks = list(entries)
    client = client or chroma_client()
    reference_note = "every one is in the monitor's reference"
    if deployed is None:
        check_gold_in_corpus(labelled, {c.id for c in chunks}, r.qa)
        if question_file is not None:
            announce_questions(question_file, reference_note)
        seed = DEFAULTS["seed"] if seed is None else seed
        here = Here(
            kind=r.retriever or DEFAULTS["retriever"],
            fusion=fusion or DEFAULTS["fusion"],
            score=r.score,
            alpha=DEFAULTS["alpha"] if alpha is None else alpha,
            pool_size=r.pool_size or DEFAULTS["pool_size"],
            seed=seed,
        )
        deployed, bundle = calibrate_here(framework, chunks, labelled, here, client=client, progress=progress)
        spec = host_spec(deployed)
    if bundle is None:
        bundle = rebuild_host(deployed, spec, chunks, client=client)
        if question_file is not None:  # once the host is known to be the calibration's
            announce_questions(question_file, reference_note)
    source = score_source(r.monitor_scores, spec[1], None if monitor is None else monitor.score_source)
    watched = bundle
    if source == "dense":  # the dense side of the fusion, on the same collection (embeddings cached)
        watched = build_host(spec[0], "dense", chunks, pool_size=deployed.pool_size_, client=client)
    if monitor is None:
        pools = [watched.fetch(q) for q in reference]
        monitor = ConformalMonitor.from_observations(
            deployed,
            pools,
            statistic=r.statistic or DEFAULTS["statistic"],
            delta=DEFAULTS["delta"] if delta is None else delta,
            seed=DEFAULTS["seed"] if seed is None else seed,
            score_source=source,
        )
    n_before = monitor.n_stream
    adapter = get_framework(spec[0])
    options = ServingOptions(monitor=monitor) if source == "served" else ServingOptions()
    served = adapter.conformal_retriever(spec[1], bundle.host, deployed, options=options)
    ask = adapter.ask(served)
    feed = dense_feed(monitor, watched.fetch) if source == "dense" else None
    for question in stream_questions:
        ask(question)
        if feed is not None:
            feed(question)
    report = {
        "n_stream": monitor.n_stream,
        "alarm_at": monitor.alarm_at,
        "alarm_query": None if monitor.alarm_at is None else monitor.alarm_at + 1,
        "martingale": [encode_float(m) for m in monitor.martingale],
        "statistic": monitor.statistic,
        "score_source": monitor.score_source,
        "statistics": [encode_float(s) for s in monitor.stream],
        "p_values": monitor.p_values,
        "log_martingale": monitor.log_martingale,
        "delta": monitor.delta,
        "threshold": monitor.threshold,
        "alpha": deployed.alpha_,
        "confidence_level": confidence_level_of(deployed.alpha_),
        "n_calibration": deployed.n_calibration_,
        "calibration_threshold": encode_float(deployed.threshold_),
        "framework": spec[0],
        "retriever": spec[1],
        "n_reference": len(monitor.reference),
        "n_stream_new": monitor.n_stream - n_before,
        "resumed_from": None if r.resume is None else str(r.resume),
        "calibration_source": "file" if r.calibration else "state" if r.resume else "calibrated",
        "calibration_file": None if r.calibration is None else str(r.calibration),
        "saved_calibration": None if save_calibration is None else str(save_calibration),
        "fusion": spec[2].key if spec[2] is not None else None,
        "score": deployed.score_family_,
        "pool_size": deployed.pool_size_,
        "seed": monitor.seed,
        "question_format": None if question_file is None else question_file.form,
    }
    # the state first: it carries its calibration, so a run killed between the two files loses nothing
    if r.save_monitor is not None:
        monitor.save(r.save_monitor)
    if save_calibration is not None:
        deployed.save(save_calibration)
    if r.json_out is not None:
        atomic_write_text(r.json_out, json.dumps(report, indent=2) + "\n")
    return report
