"""``conformal-rag label``: find each question's gold chunk with an LLM judge over the host retriever."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import calibration_inputs
from .cli_help import examples

#: A yes/no answer.
JUDGE_MAX_TOKENS = 4


def register(sub: Any) -> None:
    """Add the ``label`` sub-command to the ``conformal-rag`` parser."""
    p = sub.add_parser(
        "label",
        help="label calibration questions with an LLM judge over the host retriever",
        epilog=examples("conformal-rag label --corpus corpus.jsonl --questions questions.jsonl --out labelled.jsonl"),
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
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> None:
    report = run_label(
        LabelRequest(
            corpus=args.corpus,
            docs=args.docs,
            questions=args.questions,
            out=args.out,
            budget=args.budget,
            llm=args.llm,
            framework=args.framework,
            retriever=args.retriever,
            pool_size=args.pool_size,
            glob=args.glob,
            chunk_size=args.chunk_size,
            chunk_overlap=args.chunk_overlap,
            cache=calibration_inputs.cache_setting(args),
            progress=not args.quiet,
        ),
    )
    print(report.summary())
    print(f"wrote {report.n} labelled questions to {args.out}")


@dataclass(frozen=True)
class LabelRequest:
    """What ``conformal-rag label`` is asked to do: one field per option, with its defaults.

    ``corpus``/``docs`` name the corpus, ``questions`` the file to label and ``out`` the JSONL;
    the other fields are the command's options (see :func:`run_label`).

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
    """Index the chunked corpus in the chosen host, label the questions with the judge, save JSONL.

    Returns the :class:`~conformal_rag_plugins.labelling.llm_judge.LabelReport`. The corpus
    must be chunked as it was for ``generate-calibration`` (same ``chunk_size``/``chunk_overlap``).

    Examples
    --------
    >>> request = LabelRequest(None, "my_docs/", questions="questions.jsonl", out="labelled.jsonl")
    >>> report = run_label(request)  # doctest: +SKIP
    >>> print(report.summary())  # doctest: +SKIP
    """
    corpus, docs, questions, out = request.corpus, request.docs, request.questions, request.out
    budget, llm, framework, retriever = request.budget, request.llm, request.framework, request.retriever
    pool_size, glob, chunk_size = request.pool_size, request.glob, request.chunk_size
    chunk_overlap, cache, progress = request.chunk_overlap, request.cache, request.progress
    from ..core.errors import CalibrationError
    from ..datasets.examples import save_examples
    from ..frameworks import get_framework
    from ..labelling.options import JudgeOptions
    from ..runtime.atomic import atomic_path
    from .hosts import build_host
    from .input_checks import announce_questions, check_at_least, check_distinct_outputs, check_outputs, read_questions

    if budget < 0:
        raise CalibrationError(f"--budget must be >= 0, got {budget}.")
    check_at_least("pool_size", pool_size)
    check_distinct_outputs({"--out": out, "--cache": cache})
    check_outputs(files=[out], inputs=[*calibration_inputs.input_files(corpus, docs, glob), questions])
    question_file = read_questions(questions)
    examples = list(question_file.examples)
    chunks = calibration_inputs.load_chunks(
        framework, corpus, docs, glob=glob, chunk_size=chunk_size, chunk_overlap=chunk_overlap
    )
    ids = {c.id for c in chunks}
    unknown = sorted({s for ex in examples if (s := ex.metadata.get("source_chunk_id")) and s not in ids})
    if unknown:
        raise CalibrationError(
            f"{len(unknown)} source chunk id(s) of the questions are not in this corpus, e.g. {unknown[0]!r}; "
            "pass the corpus and --chunk-size/--chunk-overlap used by generate-calibration."
        )
    bundle = build_host(framework, retriever, chunks, pool_size=pool_size)
    model = calibration_inputs.build_llm(framework, llm, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
    announce_questions(question_file)
    labelled, report = get_framework(framework).label_with_judge(
        bundle.host,
        examples,
        model,
        budget,
        pool_size=pool_size,
        cache=cache,
        options=JudgeOptions(max_concurrency=1 if llm == "local" else 4, progress=progress),
    )
    with atomic_path(out) as tmp:
        save_examples(labelled, tmp)
    return report
