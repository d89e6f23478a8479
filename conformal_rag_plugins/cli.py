"""The ``conformal-rag`` command: ``demo`` and ``evaluate`` here, the other sub-commands from ``commands/``."""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys
from collections.abc import Sequence


def _offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _chunk_args(p: argparse.ArgumentParser) -> None:
    from .commands.cli_help import add_chunk_options

    add_chunk_options(
        p,
        "tokens per chunk, counted with the embedding model's tokenizer (default: its window, 254)",
        "overlapping tokens between chunks (default 25)",
        whole="index entries whole (MiniLM truncates long ones)",
    )


def _parser() -> argparse.ArgumentParser:
    import conformal_rag_plugins  # the package's own __version__ (not an installed copy's metadata)

    from .commands.cli_help import PERSIST_DIR_HELP, Parser, command
    from .commands.framework_registry import FRAMEWORKS
    from .commands.levels import GivenAppend, GivenStore, add_confidence_level

    p = Parser(prog="conformal-rag", description="Conformal prediction for RAG.")
    p.add_argument("--version", action="version", version=f"%(prog)s {conformal_rag_plugins.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = command(sub, "demo", "offline demo on the bundled SQuAD subset", "conformal-rag demo --no-answers")
    d.add_argument(
        "--alpha", type=float, default=0.1, action=GivenStore, help="target miscoverage of the retrieval sets"
    )
    add_confidence_level(d, default="0.9")
    d.add_argument("--persist-dir", default=None, help=PERSIST_DIR_HELP)
    d.add_argument("--out", default="conformal_rag_output", help="where the calibration JSON is written")
    d.add_argument("--pool-size", type=int, default=50, help="candidates retrieved per question")
    d.add_argument("--seed", type=int, default=0, help="seed of the calibration/test split")
    d.add_argument("--no-answers", action="store_true", help="skip the answer-set part (local LLM)")
    d.add_argument("--answer-alpha", type=float, default=0.6, help="end-to-end alpha of the answer sets")
    d.add_argument("--answer-alpha-retrieval", type=float, default=0.1, help="retrieval share of --answer-alpha")
    d.add_argument("--samples", type=int, default=5, help="answers sampled per chunk")
    d.add_argument("--quiet", action="store_true", help="no progress bar (also TQDM_DISABLE=1)")
    _chunk_args(d)

    e = command(
        sub,
        "evaluate",
        "repeated-split coverage and set size on corpus/qa JSONL",
        "conformal-rag evaluate --corpus corpus.jsonl --qa qa.jsonl --alpha 0.1 --out evaluation.json",
    )
    e.add_argument("--corpus", action="append", required=True, help="corpus JSONL (repeatable)")
    e.add_argument(
        "--qa",
        "--questions",
        dest="qa",
        required=True,
        help="question JSONL: SQuAD-style qa lines or labelled lines (gold_ids/gold_texts, from label)",
    )
    e.add_argument(
        "--alpha",
        type=float,
        action=GivenAppend,
        default=None,
        help="target miscoverage (repeatable); this or --confidence-level is required, no default",
    )
    add_confidence_level(e, default="none, give this or --alpha", repeatable=True)
    e.add_argument("--trials", type=int, default=100, help="random calibration/test splits")
    e.add_argument("--seed", type=int, default=0, help="seed of the first split")
    e.add_argument(
        "--score",
        choices=["similarity", "rank", "relative", "auto"],
        default=None,
        help="score family (default: auto with --fusion tuned, else relative)",
    )
    e.add_argument(
        "--pac-delta",
        type=float,
        default=None,
        help="also report PAC rows: coverage 1 - alpha held with probability 1 - delta over the calibration draw "
        "(with --control recall, LTT rows) (default: none, no PAC rows)",
    )
    e.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="hybrid", help="host retriever")
    e.add_argument("--framework", choices=FRAMEWORKS, default=FRAMEWORKS[0], help="whose splitter and index")
    e.add_argument("--pool-size", type=int, default=50, help="candidates retrieved per question")
    e.add_argument(
        "--fusion",
        default="tuned",
        help="hybrid fusion: 'tuned' (method and dense weight chosen on optimisation splits) or METHOD:WEIGHT "
        "such as zscore:0.5 or minmax:0.3",
    )
    _chunk_args(e)
    e.add_argument(
        "--unit",
        choices=["auto", "chunk", "parent:max", "parent:sum", "document"],
        default="auto",
        help="what is returned and counts as gold: chunks, parent documents scored from their chunks (best chunk "
        "or summed), or whole documents; 'auto' (default) lets the tuned hybrid choose by the context tokens an "
        "LLM would read",
    )
    e.add_argument(
        "--pool-sizes",
        default=None,
        metavar="N,N,...",
        help="pool sizes to compare (default: --pool-size, and 2x and 4x of it for the tuned hybrid; a larger "
        "pool competes only where the base pool misses more than alpha/2 of the questions)",
    )
    e.add_argument(
        "--out",
        "--json",
        dest="json_out",
        default=None,
        metavar="FILE",
        help="write the full report JSON here and print a short summary (default: none, the report JSON is the "
        "last line of stdout)",
    )
    e.add_argument(
        "--group-by",
        default=None,
        metavar="FIELD",
        help="a field of the qa lines known at query time (collection, tenant): adds a 'groups' block with each "
        "group's coverage and set size under the pooled and the per-group (Mondrian) threshold (default: none)",
    )
    e.add_argument(
        "--control",
        choices=["coverage", "recall"],
        default="coverage",
        help="recall: every chunk holding a reference answer is gold; adds the mean recall and set size of the "
        "recall-controlling rule (crc; ltt with --pac-delta) beside the single-gold rule",
    )
    e.add_argument(
        "--answers",
        action="store_true",
        help="evaluate end-to-end answer sets instead of retrieval (on the LlamaIndex hybrid host, pool 50, entries "
        "chunked as above: the other retrieval options are ignored)",
    )
    e.add_argument("--quiet", action="store_true", help="no progress bar (also TQDM_DISABLE=1)")
    e.add_argument("--llm", choices=["local", "openai"], default="local", help="with --answers")
    e.add_argument("--samples", type=int, default=6, help="answers sampled per chunk (with --answers)")
    e.add_argument("--max-questions", type=int, default=100, help="answerable questions used (with --answers)")
    e.add_argument(
        "--answer-pool",
        type=int,
        default=10,
        help="with --answers: candidates per question, every one of them sampled, so that any retrieval set is "
        "fully sampled and set sizes are exact (gold beyond it counts as a retrieval miss)",
    )
    e.add_argument(
        "--pilot",
        type=int,
        default=5,
        metavar="N",
        help="with --answers: first sample the gold chunks of N seeded questions (at most a fifth; left out of the "
        "evaluation), print the generator's coverage ceiling and the reachable levels, and stop (exit 2) when the "
        "target is clearly out of reach (default 5)",
    )
    e.add_argument("--no-pilot", action="store_true", help="with --answers: no pilot (same as --pilot 0)")
    e.add_argument(
        "--generator-score",
        choices=["frequency", "likelihood"],
        default="frequency",
        help="with --answers: cluster confidence, sample frequency or frequency with ties broken by the LLM's "
        "token likelihood (samples the LLM with logprobs)",
    )

    from .commands import calibrate_cmd, generate, label, monitor_cmd, report

    generate.register(sub)
    label.register(sub)
    calibrate_cmd.register(sub)
    monitor_cmd.register(sub)
    report.register(sub)
    return p


#: ``evaluate`` options that only one of its two modes reads (the other warns when they are changed).
_RETRIEVAL_ONLY = (
    "score",
    "pac_delta",
    "retriever",
    "framework",
    "pool_size",
    "fusion",
    "chunk_size",
    "chunk_overlap",
    "no_chunking",
    "unit",
    "pool_sizes",
)
_ANSWERS_ONLY = ("llm", "samples", "max_questions", "answer_pool", "generator_score", "pilot", "no_pilot")
#: ``evaluate`` options that ``--answers`` does not read (it chunks as ``evaluate`` does, so the chunk options count).
_IGNORED_WITH_ANSWERS = tuple(o for o in _RETRIEVAL_ONLY if o not in ("chunk_size", "chunk_overlap", "no_chunking"))


def _print_evaluate_notes(report: dict) -> None:
    chunking = report.get("chunking")
    if chunking:
        gold = chunking["gold"]
        print(
            f"chunking: {chunking['n_entries']} entries -> {chunking['n_chunks']} chunks "
            f"({chunking['n_split_entries']} split, largest {chunking['max_chunk_tokens']} tokens); gold: "
            f"{gold['n_answer_in_chunk']} answer-in-chunk, {gold['n_fallback']} all-chunks fallback"
        )
    for alpha, tuning in (report.get("tuning") or {}).items():
        print(f"tuned hybrid at alpha={alpha}: most often chose {tuning['most_chosen']} {tuning['choices']}")
    for alpha, best in (report.get("best_fixed") or {}).items():
        print(
            f"best fixed setting in hindsight at alpha={alpha}: {best['setting']} "
            f"({best['mean_context_tokens']:.0f} context tokens, coverage {best['mean_coverage']:.3f})"
        )
    for note in report.get("warnings") or []:
        print(f"warning: {note}", file=sys.stderr)
    for alpha, block in ((report.get("groups") or {}).get("by_alpha") or {}).items():
        worst = block["worst_group_coverage"]
        print(
            f"groups by {report['groups']['field']} at alpha={alpha}: worst group coverage "
            f"{worst['pooled']:.3f} pooled, {worst['per_group']:.3f} per group"
        )


def _print_report_end(report: dict, json_out: str | None, *, exclude: Sequence[str]) -> None:
    """Close ``evaluate``'s output: a summary line with ``--out``, else the report JSON (minus ``exclude``).

    Without ``--out`` the report JSON is the last stdout line, so a pipeline can read it.
    """
    if json_out is None:
        print(json.dumps({k: v for k, v in report.items() if k not in exclude}))
        return
    rows = report.get("results") or []
    alphas = sorted({r["alpha"] for r in rows if "alpha" in r})
    print(
        f"wrote {json_out}: {len(rows)} result rows over {report.get('n_questions', '?')} questions "
        f"at alpha {', '.join(f'{a:g}' for a in alphas)}"
    )


def _int_list(text: str | None, flag: str) -> list[int] | None:
    from .core.errors import ConformalError

    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConformalError(f"{flag} takes comma-separated whole numbers such as 50,100,200, got {text!r}.") from None


def _one_line(message: str) -> str:
    """Collapse a message onto one line (file contents quoted in errors may hold newlines)."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def _os_error_message(exc: OSError) -> str:
    """``path: reason`` for an unreadable input or unwritable output (no ``[Errno N]`` noise)."""
    if exc.filename is None:
        return str(exc)
    reason = exc.strerror or str(exc)
    if exc.filename2 is not None:
        return f"{exc.filename} -> {exc.filename2}: {reason}"
    return f"{exc.filename}: {reason}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script (``argv`` defaults to ``sys.argv[1:]``).

    Returns 0, or 2 on a usage or input error (a ``ConformalError``, or an ``OSError`` naming the
    file), printed as one ``conformal-rag: error: <message>`` line on stderr.
    """
    _offline_env()
    # A native crash (llama.cpp, onnxruntime, torch) kills the process with no Python exception:
    # print the Python stack of every thread to stderr first, so the user sees which call died.
    if not faulthandler.is_enabled():
        faulthandler.enable()
    parser = _parser()
    args = parser.parse_args(argv)
    from .commands.levels import resolve_level
    from .core.errors import ConformalError
    from .local.llm import LocalModelError

    try:
        resolve_level(args, alpha_required=args.command == "evaluate")
        from .commands.input_checks import check_chunking

        check_chunking(getattr(args, "chunk_size", None), getattr(args, "chunk_overlap", None))
        if getattr(args, "handler", None) is not None:
            args.handler(args)
        elif args.command == "demo":
            from .commands.cli_help import request_from
            from .commands.demo import DemoRequest, run_demo

            run_demo(
                request_from(
                    DemoRequest,
                    args,
                    answers=not args.no_answers,
                    n_samples=args.samples,
                    chunking=not args.no_chunking,
                    progress=not args.quiet,
                )
            )
        elif args.answers and args.group_by is not None:
            raise ConformalError("--group-by evaluates retrieval thresholds; it does not combine with --answers.")
        elif args.answers and args.control != "coverage":
            raise ConformalError("--control recall evaluates retrieval thresholds; it does not combine with --answers.")
        elif args.answers:
            from .commands.cli_help import changed_options, request_from, warn_ignored
            from .commands.evaluate_answer_sets import EvaluateAnswersRequest, run_evaluate_answers
            from .commands.tables import markdown_table

            given = changed_options(parser, args, _IGNORED_WITH_ANSWERS)
            warn_ignored("evaluate --answers", given, "it evaluates the LlamaIndex hybrid host, pool 50")

            report = run_evaluate_answers(
                request_from(
                    EvaluateAnswersRequest,
                    args,
                    alphas=args.alpha,
                    chunking=not args.no_chunking,
                    pilot=0 if args.no_pilot else args.pilot,
                    progress=not args.quiet,
                )
            )
            print(
                markdown_table(
                    report["results"],
                    [
                        "subset",
                        "alpha",
                        "method",
                        "mean_coverage",
                        "mean_set_size_sem",
                        "abstention_rate",
                        "hallucination_rate",
                        "frac_trials_guaranteed",
                    ],
                )
            )
            _print_evaluate_notes(report)  # the chunking line
            _print_report_end(report, args.json_out, exclude=())
        else:
            from .commands.cli_help import changed_options, request_from, warn_ignored
            from .commands.evaluate_retrieval import EvaluateRequest, run_evaluate
            from .commands.tables import markdown_table

            given = changed_options(parser, args, _ANSWERS_ONLY)
            warn_ignored("evaluate without --answers", given, "they set the answer-set evaluation")

            report = run_evaluate(
                request_from(
                    EvaluateRequest,
                    args,
                    alphas=args.alpha,
                    chunking=not args.no_chunking,
                    pool_sizes=_int_list(args.pool_sizes, "--pool-sizes"),
                ),
                progress=not args.quiet,
            )
            print(
                markdown_table(
                    [r for r in report["results"] if "mean_recall" not in r],
                    [
                        "alpha",
                        "method",
                        "mean_coverage",
                        "std_coverage",
                        "mean_set_size",
                        "median_set_size",
                        "mean_context_tokens",
                        "trials",
                    ],
                )
            )
            if args.control == "recall":
                from .commands.recall_rows import RECALL_COLUMNS

                print(markdown_table([r for r in report["results"] if "mean_recall" in r], RECALL_COLUMNS))
            _print_evaluate_notes(report)
            _print_report_end(report, args.json_out, exclude=("candidates",))
    except (ConformalError, LocalModelError) as exc:
        print(f"conformal-rag: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"conformal-rag: error: {_one_line(_os_error_message(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:  # a full or read-only disk under the Chroma index, reported by Chroma itself
        from .local.chroma import disk_error

        error = disk_error(exc, getattr(args, "persist_dir", None))
        if error is None:
            raise
        print(f"conformal-rag: error: {_one_line(_os_error_message(error))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
