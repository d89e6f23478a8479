"""``conformal-rag generate-calibration``: questions from your own chunks with an LLM (CONFLARE step 1)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import calibration_inputs
from .cli_help import command, request_from
from .input_checks import check_at_least, check_output_options, whole_number_option

#: Sampling temperature of the question writer (some variety between retries).
GENERATION_TEMPERATURE = 0.7
#: Enough for one ``{"question", "answer"}`` object.
GENERATION_MAX_TOKENS = 96


def register(sub: Any) -> None:
    """Add the ``generate-calibration`` sub-command to the ``conformal-rag`` parser."""
    p = command(
        sub,
        "generate-calibration",
        "generate calibration questions from your chunks with an LLM",
        "conformal-rag generate-calibration --docs my_docs/ --n 200 --out questions.jsonl",
        handler=_handle,
    )
    calibration_inputs.add_corpus_arguments(p)
    p.add_argument("--n", type=int, default=100, help="questions to generate (one per sampled chunk)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled chunks")
    p.add_argument("--topic", default=None, help="topic of interest, inserted into the prompt")
    p.add_argument("--max-retries", type=int, default=2, help="further attempts per chunk after a bad output")
    p.add_argument(
        "--passage-sentences",
        default=None,
        metavar="K",
        help="show the LLM only K consecutive sentences of each chunk (a seeded window, another one on each retry); "
        "the answer is still checked against the whole chunk, which stays the gold. Small base models write usable "
        "questions far more often from a short passage (default: none, the whole chunk)",
    )
    p.add_argument("--out", required=True, help="calibration questions JSONL to write")


def _handle(args: argparse.Namespace) -> None:
    report = run_generate(
        request_from(
            GenerateRequest,
            args,
            cache=calibration_inputs.cache_setting(args),
            progress=not args.quiet,
            passage_sentences=whole_number_option("--passage-sentences", args.passage_sentences),
        )
    )
    print(report.summary())
    print(f"wrote {report.n_generated} questions to {args.out}")


@dataclass(frozen=True)
class GenerateRequest:
    """The options of ``conformal-rag generate-calibration`` (see :func:`run_generate`).

    Examples
    --------
    >>> request = GenerateRequest(None, "my_docs/", n=100, out="questions.jsonl")
    >>> request.llm, request.max_retries, request.passage_sentences
    ('local', 2, None)
    """

    corpus: Sequence[str | Path] | None
    docs: str | Path | None
    n: int
    out: str | Path
    llm: str = "local"
    framework: str = "llamaindex"
    seed: int = 0
    topic: str | None = None
    glob: str = "*.txt"
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    max_retries: int = 2
    cache: str | bool = True
    progress: bool = True
    passage_sentences: int | None = None


def run_generate(request: GenerateRequest) -> Any:
    """Chunk the corpus, generate ``n`` questions with the framework's LLM, save them; return the report.

    A corpus with fewer usable chunks than ``n`` fails before the LLM is loaded. An LLM that answers
    no call (:class:`~conformal_rag_plugins.core.errors.LLMUnavailableError`) or a run that keeps no
    question fails without writing ``out``. ``passage_sentences`` is
    :class:`~conformal_rag_plugins.labelling.options.QuestionOptions`' option of the same name (``None``:
    the LLM sees the whole chunk); a value below 1 fails before the corpus is read.
    """
    from ..core.errors import CalibrationError
    from ..datasets.examples import save_examples
    from ..labelling.options import QuestionOptions
    from ..labelling.question_gen import sample_chunks
    from ..runtime.atomic import atomic_path
    from .framework_registry import get_framework

    check_at_least("max_retries", request.max_retries, 0)
    check_at_least("seed", request.seed, 0)
    if request.passage_sentences is not None:
        check_at_least("--passage-sentences", request.passage_sentences)
    check_output_options({"--out": request.out}, inputs=calibration_inputs.request_inputs(request), cache=request.cache)
    chunks = calibration_inputs.request_chunks(request)
    sample_chunks(chunks, request.n, request.seed)  # fail fast when the corpus is too small
    model = calibration_inputs.build_llm(
        request.framework, request.llm, temperature=GENERATION_TEMPERATURE, max_tokens=GENERATION_MAX_TOKENS
    )
    examples, report = get_framework(request.framework).generate_questions(
        chunks,
        model,
        request.n,
        seed=request.seed,
        topic=request.topic,
        cache=request.cache,
        options=QuestionOptions(
            max_retries=request.max_retries,
            max_concurrency=1 if request.llm == "local" else 4,
            progress=request.progress,
            passage_sentences=request.passage_sentences,
        ),
    )
    if report.n_generated == 0:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(report.rejected.items())) or "none"
        raise CalibrationError(
            f"No question was generated from {report.n_chunks_tried} chunks (rejected outputs: {reasons}); "
            f"{request.out} was not written."
        )
    with atomic_path(request.out) as tmp:
        save_examples(examples, tmp)
    return report
