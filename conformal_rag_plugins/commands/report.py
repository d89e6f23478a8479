"""``conformal-rag report``: a calibration measured on held-out questions, as figures and one HTML page.

Rebuilds the calibration's host (:mod:`.report_host`), queries the held-out questions once and
writes ``OUT/``: one PNG per figure, a self-contained ``index.html`` and ``report.json``, as one unit
(:func:`~conformal_rag_plugins.runtime.atomic.write_unit`: all of them or none).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import CalibrationError, CalibrationIntegrityError, InputFileError
from .cli_help import AS_CALIBRATE, add_chunk_options, command


def register(sub: Any) -> None:
    """Add the ``report`` sub-command to the ``conformal-rag`` parser."""
    p = command(
        sub,
        "report",
        "figures and an HTML page of a calibration's coverage on held-out questions",
        "conformal-rag report --calibration calibration.json --corpus corpus.jsonl --qa held_out.jsonl --out report/",
        handler=_handle,
    )
    p.add_argument("--calibration", required=True, help="calibration JSON (from calibrate, or an answer-set one)")
    p.add_argument("--corpus", action="append", required=True, help="corpus JSONL it was made on (repeatable)")
    p.add_argument(
        "--qa",
        "--questions",
        dest="qa",
        required=True,
        help="held-out question JSONL: SQuAD-style qa lines or labelled lines (as for evaluate and calibrate)",
    )
    p.add_argument("--out", required=True, help="folder for index.html, report.json and the PNGs")
    add_chunk_options(p, *AS_CALIBRATE)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _handle(args: argparse.Namespace) -> None:
    report = run_report(
        args.calibration,
        args.corpus,
        args.qa,
        args.out,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        progress=not args.quiet,
    )
    grid = report["coverage"]
    if report["n_unrecorded_optimisation_questions"]:
        print(
            f"note: this calibration file predates the record of the {report['n_unrecorded_optimisation_questions']} "
            "questions that tuned the host (or chose the answer-set split, or ran its pilot), so they may be among the "
            "held-out ones: re-run calibrate to record them"
        )
    print(
        f"{report['verdict']['text']} (n_test={grid['n_test']}, n_calibration={grid['n_calibration']}); "
        f"wrote {len(report['figures'])} figures to {args.out}/index.html"
    )


def load_any_calibration(path: str | Path) -> Any:
    """A :class:`RetrievalCalibration` or an :class:`AnswerSetCalibration`, told apart by the file's ``kind``."""
    from ..answer_sets.calibration import AnswerSetCalibration
    from ..retrieval.calibration import RetrievalCalibration
    from ..storage.jsonio import loads_strict, naming_file

    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise CalibrationIntegrityError(f"{path}: not UTF-8 JSON; it is corrupted.") from None
    with naming_file(path):
        data = loads_strict(text)
    kind = data.get("kind") if isinstance(data, dict) else None
    if isinstance(kind, str) and kind.endswith("answer_set_calibration"):
        return AnswerSetCalibration.load(path)
    return RetrievalCalibration.load(path)


def run_report(
    calibration: str | Path,
    corpus: Sequence[str | Path],
    qa: str | Path,
    out: str | Path,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    client: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``out/index.html``, ``out/report.json`` and the PNGs; return the report dict.

    ``qa`` questions the calibration used are left out, and so are the recorded optimisation questions
    (those that tuned the host, and those that chose an answer-set calibration's split of alpha);
    ``client`` defaults to in-memory Chroma.

    Raises
    ------
    ConformalError
        Before indexing: a malformed or tampered calibration, one that does not record its questions
        (no ``question_ids``), an unrebuildable host, malformed files, no held-out question. After:
        the rebuilt host or chunks differ (``FingerprintMismatchError``).
    OSError
        A missing input file or an unwritable ``out``.
    """
    from ..answer_sets.calibration import AnswerSetCalibration
    from ..datasets.examples import load_corpus
    from ..local.chroma import chroma_client
    from ..report.figures import FIGURE_NAMES, build_figures
    from ..report.used_questions import used_questions
    from ..retrieval.pool_calibration import collect_observations
    from ..runtime.atomic import check_unit_targets
    from .chunk_corpus import chunk_corpus
    from .input_checks import announce_questions, check_gold_in_corpus, check_not_inputs, check_outputs, read_questions
    from .report_host import host_rows, host_spec, rebuild_host

    check_outputs(dirs=[out])
    names = ("index.html", "report.json", *FIGURE_NAMES)
    check_unit_targets(out, names)  # a FIFO or folder at one of them is refused before any work, not after the PNGs
    written = [Path(out) / name for name in names]
    check_not_inputs(written, [calibration, *corpus, qa])
    cal = load_any_calibration(calibration)
    answer_cal = cal if isinstance(cal, AnswerSetCalibration) else None
    retrieval = cal.retrieval_ if answer_cal is not None else cal
    spec = host_spec(retrieval)
    entries = load_corpus(*corpus)
    if not entries:
        raise InputFileError("The corpus holds no entries.")
    question_file = read_questions(qa, "qa")
    questions = question_file.labelled()
    if not retrieval.question_ids_:
        raise CalibrationError(
            f"{calibration}: the calibration does not record which questions it was calibrated on (question_ids is "
            "empty: made from bare pools, or edited), so the report cannot leave them out of the held-out ones. "
            "Re-run conformal-rag calibrate (or calibrate on a host with labelled examples), which records them."
        )
    chunked = chunk_corpus(spec[0], entries, questions, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    check_gold_in_corpus(chunked.questions, {c.id for c in chunked.chunks}, qa)
    # its own questions, the host's tuning ones, an answer-set split's and pilot's (one rule with evaluate)
    questions_used = used_questions(cal)
    used = questions_used.calibration
    heldout = [q for q in chunked.questions if q.digest not in questions_used.all]
    if not heldout:
        raise InputFileError(
            f"{qa}: no held-out question: all {len(chunked.questions)} answerable questions were used to calibrate, "
            "to tune the host or to choose the answer-set split."
        )
    n_calibration_left_out = sum(1 for q in chunked.questions if q.digest in used)
    n_split_left_out = sum(1 for q in chunked.questions if q.digest in questions_used.answer_set_only)
    bundle = rebuild_host(retrieval, spec, chunked.chunks, client=client or chroma_client())
    announce_questions(question_file, f"{len(heldout)} answerable ones held out from the calibration")
    observations = collect_observations(heldout, bundle.fetch, progress=progress)
    figures, numbers = build_figures(retrieval, observations, answer_cal)
    out = Path(out)
    report: dict[str, Any] = {
        "calibration": str(calibration),
        "kind": "answer_set" if answer_cal is not None else "retrieval",
        "summary": retrieval.summary() if answer_cal is None else answer_cal.summary(),
        "host": {
            "framework": spec[0],
            "retriever": spec[1],
            "fusion": spec[2].key if spec[2] else None,
            "pool_size": retrieval.pool_size_,
        },
        "chunking": chunked.report(),
        "question_format": question_file.form,
        "n_questions": len(chunked.questions),
        "n_heldout": len(heldout),
        "n_excluded_calibration_questions": n_calibration_left_out,
        # every optimisation question left out: those that tuned the host and those that chose the answer-set split
        "n_excluded_optimisation_questions": len(chunked.questions) - len(heldout) - n_calibration_left_out,
        "n_excluded_split_optimisation_questions": n_split_left_out,
        # files saved before the optimisation questions were recorded: they cannot be left out
        "n_unrecorded_optimisation_questions": questions_used.unrecorded,
        **numbers,
        "figures": [f.name for f in figures],
    }
    from ..report.page import render_page
    from ..runtime.atomic import write_unit

    left_out = f"{n_calibration_left_out} calibration"
    n_host_left_out = report["n_excluded_optimisation_questions"] - n_split_left_out
    if n_host_left_out:
        left_out += f", {n_host_left_out} host-tuning"
    if n_split_left_out:
        left_out += f", {n_split_left_out} split-choosing"
    summary = [
        ("calibration", report["summary"]),
        ("held-out questions", f"{len(heldout)} ({left_out} ones left out)"),
    ]
    if report["n_unrecorded_optimisation_questions"]:
        summary.append(
            (
                "not recorded",
                f"{report['n_unrecorded_optimisation_questions']} optimisation questions (older file; they may be "
                "among the held-out ones)",
            )
        )
    verdict = (numbers["verdict"]["status"], numbers["verdict"]["text"])
    ties = [t["text"] for t in numbers["tie_levels"]]
    page = render_page(
        "Conformal calibration report",
        summary,
        figures,
        verdict=verdict,
        host=host_rows(retrieval, spec),
        tie_notes=ties,
    )
    files = {fig.name: fig.png for fig in figures}
    files["report.json"] = (json.dumps(report, indent=2, allow_nan=False) + "\n").encode("utf-8")
    files["index.html"] = page.encode("utf-8")
    write_unit(out, files, owned=names)  # one unit: a kill -9 never leaves new figures beside an old report.json
    return report
