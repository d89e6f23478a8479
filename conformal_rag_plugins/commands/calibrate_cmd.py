"""``conformal-rag calibrate``: labelled questions + corpus -> a saved retrieval calibration.

Last step of ``generate-calibration`` -> ``label`` -> ``calibrate``. Chunks go to a persistent
Chroma directory (reopenable from Python); a hybrid host is tuned unless ``--fusion`` fixes it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..retrieval.options import RetrievalOptions
from ..tuning.options import TuningOptions
from . import calibration_inputs
from .cli_help import PERSIST_DIR_HELP, command, request_from, warn_ignored
from .input_checks import (
    announce_questions,
    check_at_least,
    check_gold_in_corpus,
    check_output_options,
    check_pool_option,
    read_questions,
)
from .levels import GivenStore, add_confidence_level


def register(sub: Any) -> None:
    """Add the ``calibrate`` sub-command to the ``conformal-rag`` parser."""
    p = command(
        sub,
        "calibrate",
        "calibrate a conformal retriever on labelled questions and save the JSON",
        "conformal-rag calibrate --corpus corpus.jsonl --questions labelled.jsonl --alpha 0.1 --out calibration.json",
        handler=_handle,
    )
    # no LLM here: --llm/--cache/--no-cache are accepted (older scripts pass them) but hidden and ignored
    calibration_inputs.add_corpus_arguments(p, llm=False)
    p.add_argument(
        "--questions",
        "--qa",
        dest="questions",
        required=True,
        help="question JSONL: labelled lines (from label) or SQuAD-style qa lines (unanswerable ones are skipped)",
    )
    p.add_argument("--out", required=True, help="calibration JSON to write")
    p.add_argument(
        "--alpha", type=float, default=0.1, action=GivenStore, help="target miscoverage (confidence level 1 - alpha)"
    )
    add_confidence_level(p, default="0.9")
    p.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="hybrid", help="host retriever")
    p.add_argument("--fusion", default="tuned", help="'tuned' or METHOD:WEIGHT such as zscore:0.5 (hybrid only)")
    p.add_argument(
        "--score",
        choices=["auto", "relative", "similarity", "rank"],
        default=None,
        help="score family (default: auto for the tuned hybrid, else relative)",
    )
    p.add_argument("--pool-size", type=int, default=50, help="candidates retrieved per question")
    p.add_argument("--persist-dir", default=None, help=PERSIST_DIR_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed of the optimisation/calibration split")
    p.add_argument(
        "--group-by",
        default=None,
        metavar="FIELD",
        help="a field of the labelled questions known at query time (collection, tenant): the saved calibration "
        "also holds one threshold per group (Mondrian); pass group=... to ConformalRetriever",
    )
    p.add_argument(
        "--chunk-group-key",
        default=None,
        metavar="KEY",
        help="label-conditional thresholds: a chunk metadata key (collection, source, title); each question counts "
        "in the group of its gold chunk (its qa field KEY, else the chunk's title when KEY is 'title'), and the "
        "retrievers keep a chunk iff it passes the threshold of its own metadata[KEY] (not with --group-by)",
    )
    p.add_argument(
        "--group-fallback",
        choices=["keep_all", "pooled"],
        default="keep_all",
        help="with --group-by: what a group too small for its own threshold, or unseen at calibration, gets: every "
        "candidate in the pool (keep_all) or the pooled threshold; either is marked conformal_guaranteed=False",
    )
    p.add_argument(
        "--pool-sizes",
        default=None,
        metavar="N,N,...",
        help="pool sizes the tuned hybrid tries (default: 1x, 2x and 4x --pool-size); a larger pool competes only "
        "when --pool-size misses more than alpha/2 of the tuning questions",
    )


def _handle(args: argparse.Namespace) -> None:
    given = calibration_inputs.ignored_llm_options(args)
    warn_ignored("calibrate", given, "calibration calls no LLM", deprecated=True)
    cal = run_calibrate(
        request_from(CalibrateRequest, args, progress=not args.quiet, pool_sizes=_pool_sizes(args.pool_sizes))
    )
    print(cal.summary())
    kind = f"chunk group {cal.chunk_group_key_}=" if cal.chunk_group_key_ else "group "
    for g, v in cal.groups_.items():
        print(f"{kind}{g}: n={v['n']} threshold={v['threshold']:.6g} ({v['source']})")
    if cal.labels_:
        print(f"labels: {cal.labels_}")
    if cal.selection_.get("rule") == "tuned-hybrid":
        sel = cal.selection_
        print(f"tuned: fusion {sel['fusion_method']}:{sel['dense_weight']:g}, score {cal.score_family_}")
        if "pool_size" in sel:
            print(f"tuned: pool {sel['pool_size']} of {sel['pool_sizes']}, by {sel['tuning_objective']}")
    print(f"wrote {args.out}")


@dataclass(frozen=True)
class CalibrateRequest:
    """The options of ``conformal-rag calibrate`` (see :func:`run_calibrate`); ``alpha`` is ``1 - confidence_level``.

    Examples
    --------
    >>> request = CalibrateRequest(None, "my_docs/", questions="labelled.jsonl", out="calibration.json")
    >>> request.retriever, request.fusion
    ('hybrid', 'tuned')
    """

    corpus: Any
    docs: str | Path | None
    questions: str | Path
    out: str | Path
    alpha: float = 0.1
    framework: str = "llamaindex"
    retriever: str = "hybrid"
    fusion: str = "tuned"
    score: str | None = None
    pool_size: int = 50
    persist_dir: str | Path | None = None
    glob: str = "*.txt"
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    seed: int = 0
    progress: bool = True
    group_by: str | None = None
    pool_sizes: Sequence[int] | None = None
    group_fallback: str = "keep_all"
    chunk_group_key: str | None = None


def run_calibrate(request: CalibrateRequest) -> Any:
    """Index the chunked corpus, calibrate on the labelled questions, save and return the calibration.

    ``questions`` may be SQuAD-style or labelled (``gold_ids``/``gold_texts``); unanswerable
    questions are skipped, an answerable one without gold is refused with its line. ``group_by``
    adds per-query-group thresholds, ``chunk_group_key`` label-conditional ones (per gold chunk
    group). A tuned hybrid also picks the pool among ``pool_sizes`` (default 1x, 2x, 4x
    ``pool_size``) by mean context tokens on the optimisation split. Document-level gold ids move
    onto the chunks holding a reference answer (recorded in ``labels_``).

    Everything is refused (bad options, malformed files naming file and line, gold ids missing from
    the corpus, unwritable ``out``) before indexing; ``out`` is written atomically.
    """
    from ..core.errors import ConformalError, InputFileError
    from ..core.validation import check_alpha
    from ..labelling.chunk_labels import map_gold_to_chunks
    from ..local.chroma import chroma_client
    from ..local.encoder import default_cache_dir
    from ..runtime.atomic import atomic_path
    from ..tuning.tuned_calibration import FusionConfig
    from .hosts import build_hosts

    r = request
    alpha = check_alpha(r.alpha)
    check_pool_option("pool_size", r.pool_size)
    check_at_least("seed", r.seed, 0)
    for size in r.pool_sizes or ():
        check_pool_option("pool_sizes", size)
    inputs = calibration_inputs.request_inputs(r, r.questions)
    check_output_options({"--out": r.out}, {"--persist-dir": r.persist_dir}, inputs=inputs)
    if r.group_by is not None and r.chunk_group_key is not None:
        raise ConformalError("--group-by (a group of the query) and --chunk-group-key (of a chunk) exclude each other.")
    if r.chunk_group_key is not None and not r.chunk_group_key.strip():
        raise ConformalError("--chunk-group-key must be a non-empty metadata key.")
    file = read_questions(r.questions)
    examples = file.labelled()  # answerable questions, each with gold (an unlabelled one is named by its line)
    if not examples:
        raise InputFileError(f"{r.questions}: no answerable questions to calibrate on.")
    groups = _groups_by_question(examples, r.group_by) if r.group_by is not None else None
    chunks = calibration_inputs.request_chunks(r)
    examples, _ = map_gold_to_chunks(examples, chunks)  # document-level gold -> the chunks holding the answer
    check_gold_in_corpus(examples, {c.id for c in chunks}, r.questions)
    if r.chunk_group_key is not None:
        from ..retrieval.groups import chunk_group_labels

        seen = {c.id: c.title for c in chunks if c.title} if r.chunk_group_key == "title" else {}
        labels_of = chunk_group_labels(examples, r.chunk_group_key, seen)
        groups = {ex.digest: g for ex, g in zip(examples, labels_of, strict=True)}
    skipped = f"calibrating on the {len(examples)} answerable ones" if file.n_unanswerable else ""
    announce_questions(file, skipped)  # unanswerable questions have no gold to calibrate on
    client = chroma_client(Path(r.persist_dir) if r.persist_dir else default_cache_dir() / "chroma")
    tuned = r.retriever == "hybrid" and r.fusion == "tuned"
    grid = None if tuned else [FusionConfig.parse(r.fusion) if r.retriever == "hybrid" else FusionConfig("zscore", 0.5)]
    family = r.score or ("auto" if tuned else "relative")
    if tuned:
        opts = RetrievalOptions(
            score=family, random_state=r.seed, group_by=r.group_by, group_fallback=r.group_fallback, progress=r.progress
        )
        cal = _tuned(
            r.framework,
            chunks,
            examples,
            client,
            level=1 - alpha,
            pool=r.pool_size,
            options=opts,
            pool_sizes=r.pool_sizes,
        )
    else:
        bundle = next(
            iter(
                build_hosts(r.framework, r.retriever, chunks, grid=grid, pool_size=r.pool_size, client=client).values()
            )
        )
        cal = calibrate_built_host(
            r.framework, bundle.host, examples, 1 - alpha, family, r.pool_size, r.seed, r.progress
        )
    # the tuned path groups its own calibration part by the query's group; chunk groups are applied here
    if groups is not None and (r.chunk_group_key is not None or not tuned):
        from ..retrieval.groups import with_chunk_groups, with_groups

        labels = [groups[q] for q in cal.question_ids_]
        if r.chunk_group_key is not None:
            cal = with_chunk_groups(cal, labels, r.chunk_group_key, fallback=r.group_fallback)
        else:
            cal = with_groups(cal, labels, r.group_by, fallback=r.group_fallback)  # type: ignore[arg-type]
    with atomic_path(r.out) as tmp:
        cal.save(tmp)
    return cal


def _groups_by_question(examples: Any, field: str) -> dict[str, str]:
    """Question digest -> group (``example.metadata[field]``); a missing field names the question."""
    from ..retrieval.groups import group_labels

    return {ex.digest: g for ex, g in zip(examples, group_labels(examples, field), strict=True)}


def calibrate_built_host(
    framework: str, host: Any, examples: Any, level: float, family: str, pool_size: int, seed: int, progress: Any
) -> Any:
    """Calibrate a host the command line built (dense, BM25, fixed hybrid) with its framework's ``calibrate_retriever``.

    The untuned half of ``conformal-rag calibrate`` (the tuned hybrid is :func:`_tuned`): the command's
    options (``--score``, ``--seed``, ``--pool-size``) become the adapter's call.
    """
    from .framework_registry import get_framework

    return get_framework(framework).calibrate_retriever(
        host,
        examples,
        confidence_level=level,
        pool_size=pool_size,
        options=RetrievalOptions(score=family, random_state=seed, progress=progress),
    )


def _tuned(
    framework: str,
    chunks: Any,
    examples: Any,
    client: Any,
    *,
    level: float,
    pool: int,
    options: RetrievalOptions,
    pool_sizes: Sequence[int] | None = None,
) -> Any:
    """The tuned hybrid of ``framework`` on the chunks indexed in ``client`` (fusion, family, unit, pool).

    The route of ``ConformalRetriever.from_documents`` too (``frameworks.calibrate_tuned_chunks``, given
    the adapter object the registry holds for ``framework``).
    """
    from ..frameworks import calibrate_tuned_chunks
    from .framework_registry import get_framework

    sizes = None if pool_sizes is None else sorted({pool, *pool_sizes})
    _, cal = calibrate_tuned_chunks(
        get_framework(framework),
        chunks,
        examples,
        client=client,
        confidence_level=level,
        pool_size=pool,
        options=options,
        tuning=TuningOptions(pool_sizes=sizes),
    )
    return cal


def _pool_sizes(text: str | None) -> list[int] | None:
    """``"50,100,200"`` -> ``[50, 100, 200]``; a bad list exits with a clear message."""
    if text is None:
        return None
    from ..core.errors import ConformalError

    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConformalError(f"--pool-sizes must be whole numbers separated by commas, got {text!r}.") from None
    if not sizes:
        raise ConformalError(f"--pool-sizes must list at least one pool size, got {text!r}.")
    return sizes
