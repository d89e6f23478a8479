"""``conformal-rag label``: find each question's gold chunk with an LLM judge over the host retriever."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import calibration_inputs
from .cli_help import command, request_from

#: A yes/no answer.
JUDGE_MAX_TOKENS = 4


def register(sub: Any) -> None:
    """Add the ``label`` sub-command to the ``conformal-rag`` parser."""
    p = command(
        sub,
        "label",
        "label calibration questions with an LLM judge over the host retriever",
        "conformal-rag label --corpus corpus.jsonl --questions questions.jsonl --out labelled.jsonl",
        handler=_handle,
    )
    calibration_inputs.add_corpus_arguments(p)
    p.add_argument(
        "--questions",
        "--qa",
        dest="questions",
        required=True,
        help="question JSONL: from generate-calibration, labelled lines, or SQuAD-style qa lines",
    )
    p.add_argument("--out", required=True, help="labelled calibration JSONL to write")
    p.add_argument("--budget", type=int, default=5, help="chunks judged per question at most")
    p.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="hybrid", help="host retriever")
    p.add_argument("--pool-size", type=int, default=50, help="candidates retrieved per question")


def _handle(args: argparse.Namespace) -> None:
    report = run_label(
        request_from(LabelRequest, args, cache=calibration_inputs.cache_setting(args), progress=not args.quiet)
    )
    print(report.summary())
    print(f"wrote {report.n} labelled questions to {args.out}")


@dataclass(frozen=True)
class LabelRequest:
    """The options of ``conformal-rag label`` (see :func:`run_label`).

    Examples
    --------
    >>> request = LabelRequest(None, "my_docs/", questions="questions.jsonl", out="labelled.jsonl")
    >>> request.budget, request.retriever
    (5, 'hybrid')
    """

    corpus: Sequence[str | Path] | None
    docs: str | Path | None
    questions: str | Path
    out: str | Path
    budget: int = 5
    llm: str = "local"
    framework: str = "llamaindex"
    retriever: str = "hybrid"
    pool_size: int = 50
    glob: str = "*.txt"
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    cache: str | bool = True
    progress: bool = True


def run_label(request: LabelRequest) -> Any:
    """Index the chunked corpus, label the questions with the judge, save JSONL; return the report.

    Chunk as for ``generate-calibration`` (same ``chunk_size``/``chunk_overlap``).
    """
    from ..core.errors import CalibrationError, LLMUnavailableError
    from ..datasets.examples import save_examples
    from ..labelling.options import JudgeOptions
    from ..runtime.atomic import atomic_path
    from .framework_registry import get_framework
    from .hosts import build_host
    from .input_checks import (
        announce_questions,
        check_output_options,
        check_pool_option,
        read_questions,
    )
    from .llm_answered import check_judge_answered

    if request.budget < 0:
        raise CalibrationError(f"--budget must be >= 0, got {request.budget}.")
    check_pool_option("pool_size", request.pool_size)
    inputs = calibration_inputs.request_inputs(request, request.questions)
    check_output_options({"--out": request.out}, inputs=inputs, cache=request.cache)
    question_file = read_questions(request.questions)
    examples = list(question_file.examples)
    chunks = calibration_inputs.request_chunks(request)
    ids = {c.id for c in chunks}
    unknown = sorted({s for ex in examples if (s := ex.metadata.get("source_chunk_id")) and s not in ids})
    if unknown:
        raise CalibrationError(
            f"{len(unknown)} source chunk id(s) of the questions are not in this corpus, e.g. {unknown[0]!r}; "
            "pass the corpus and --chunk-size/--chunk-overlap used by generate-calibration."
        )
    bundle = build_host(request.framework, request.retriever, chunks, pool_size=request.pool_size)
    model = calibration_inputs.build_llm(request.framework, request.llm, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
    announce_questions(question_file)
    try:
        labelled, report = get_framework(request.framework).label_with_judge(
            bundle.host,
            examples,
            model,
            request.budget,
            pool_size=request.pool_size,
            cache=request.cache,
            options=JudgeOptions(max_concurrency=1 if request.llm == "local" else 4, progress=request.progress),
        )
    except LLMUnavailableError as exc:  # the judge's first calls all failed: stopped early
        raise LLMUnavailableError(f"{exc} {request.out} was not written.") from None
    check_judge_answered(report, request.llm, request.out)
    with atomic_path(request.out) as tmp:
        save_examples(labelled, tmp)
    return report

