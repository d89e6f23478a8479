"""``conformal-rag evaluate``: repeated-split coverage and set size on corpus/qa JSONL files."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..calibration.examples import CalibrationExample, CorpusEntry, load_corpus, load_qa
from ..calibration.pool_calibration import collect_observations
from ..calibration.tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig
from ..core.config_search import evaluate_tuned_splits
from ..core.errors import ConformalError, InputFileError
from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..core.retrieval_scores import SCORE_FAMILIES
from ..core.retrieval_trials import PoolObservation, evaluate_splits
from ..core.validation import check_alpha
from ..runtime.atomic import atomic_write_text
from .chunk_corpus import chunk_corpus
from .evaluate_groups import groups_block, question_groups
from .hosts import build_hosts
from .input_checks import check_at_least, check_gold_in_corpus, check_outputs

__all__ = ["DEFAULT_FUSION", "evaluate_observations", "run_evaluate"]

#: The fixed fusion setting used when a hybrid host is not tuned, and as the baseline when it is.
DEFAULT_FUSION = FusionConfig("zscore", DEFAULT_DENSE_WEIGHT)


def evaluate_observations(
    observations: dict[FusionConfig | None, list[PoolObservation]],
    alphas: Sequence[float],
    *,
    tuned: bool,
    score: str,
    trials: int,
    seed: int,
    pac_delta: float | None = None,
    topk: Sequence[int] = (1, 5, 10),
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows for every alpha, plus the tuning choices when ``tuned``.

    Fixed hosts: ``split`` (and ``pac``), ``topk@k``, ``conflare`` on the fixed
    configuration (:data:`DEFAULT_FUSION` for a tuned hybrid). Tuned hybrids add a
    ``tuned`` row whose configuration and family are chosen inside every trial on
    an optimisation part of the calibration half.
    """
    base = observations.get(DEFAULT_FUSION, observations.get(None))
    if base is None:
        base = next(iter(observations.values()))
    fixed_family = "relative" if score == "auto" and tuned else score
    rows: list[dict[str, Any]] = []
    tuning: dict[str, Any] = {}
    for alpha in alphas:
        for summary in evaluate_splits(
            base, alpha, family=fixed_family, trials=trials, seed=seed, pac_delta=pac_delta, topk=topk
        ):
            rows.append(summary.as_row())
        if tuned:
            families = SCORE_FAMILIES if score == "auto" else (score,)
            by_key = {c.key: obs for c, obs in observations.items() if c is not None}
            summary, choices = evaluate_tuned_splits(by_key, alpha, families=families, trials=trials, seed=seed)
            rows.append(summary.as_row())
            tuning[f"{alpha:g}"] = {
                "most_chosen": choices.most_common(1)[0][0],
                "choices": dict(choices.most_common()),
            }
    return rows, tuning


def _fusion_grid(retriever: str, fusion: str) -> tuple[list[FusionConfig], bool]:
    if retriever != "hybrid":
        return [DEFAULT_FUSION], False
    if fusion == "tuned":
        grid = list(DEFAULT_FUSION_GRID)
        if DEFAULT_FUSION not in grid:
            grid.append(DEFAULT_FUSION)
        return grid, True
    return [FusionConfig.parse(fusion)], False


def run_evaluate(
    corpus: Sequence[str | Path] | Sequence[CorpusEntry],
    qa: str | Path | Sequence[CalibrationExample],
    alphas: Sequence[float],
    *,
    trials: int = 100,
    seed: int = 0,
    score: str | None = None,
    pac_delta: float | None = None,
    retriever: str = "hybrid",
    framework: str = "llamaindex",
    pool_size: int = 50,
    fusion: str = "tuned",
    chunking: bool = True,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    json_out: str | Path | None = None,
    progress: bool = True,
    client: Any = None,
    group_by: str | None = None,
    control: str = "coverage",
) -> dict[str, Any]:
    """Run the evaluation and return (and optionally write) the JSON report.

    Parameters
    ----------
    corpus : paths of corpus JSONL files, or corpus entries
    qa : path of a SQuAD-style qa JSONL, or examples
    alphas : sequence of float
    score : str, optional
        Score family; default ``auto`` for a tuned hybrid (chosen with the fusion
        setting), else ``relative``.
    fusion : str, default "tuned"
        ``"tuned"`` searches :data:`~conformal_rag_plugins.calibration.tuned_calibration.DEFAULT_FUSION_GRID`
        on optimisation splits; ``"zscore:0.5"`` etc. fixes the hybrid setting.
    chunking : bool, default True
        Split entries longer than the embedding window (``chunk_size``/``chunk_overlap``
        in MiniLM tokens) and move gold ids onto chunks.
    group_by : str, optional
        A field of the qa lines known at query time (a collection, a tenant): the report gains
        a ``groups`` block with, per group, its size and the coverage and mean set size under
        the pooled threshold and under the group's own (Mondrian) one, over the same trials
        (:func:`~conformal_rag_plugins.commands.evaluate_groups.groups_block`).
    control : {"coverage", "recall"}, default "coverage"
        ``recall`` adds ``crc`` (and, with ``pac_delta``, ``ltt``) and ``single-gold`` rows with
        the mean recall of every gold chunk (see :func:`~.recall_rows.recall_report`), and the
        keys ``control`` and ``recall``; ``coverage`` writes today's report unchanged.

    Examples
    --------
    >>> report = run_evaluate(["corpus.jsonl"], "qa.jsonl", [0.1], trials=20)  # doctest: +SKIP
    >>> report["tuning"]["0.1"]["most_chosen"]  # doctest: +SKIP
    'zscore:0.5|relative'

    Raises
    ------
    ConformalError
        Before any indexing: a bad alpha, ``trials`` or ``pool_size`` below 1, a malformed
        corpus or qa file (:class:`~conformal_rag_plugins.core.errors.InputFileError`, naming
        file and line), a qa ``context_id`` missing from the corpus, no answerable question.
    OSError
        ``json_out`` cannot be written (missing directory, a directory, not writable).
    """
    alphas = [check_alpha(a) for a in alphas]
    check_at_least("trials", trials)
    check_at_least("pool_size", pool_size)
    check_outputs(files=[json_out])
    if control not in ("coverage", "recall"):
        raise ConformalError(f"control must be 'coverage' or 'recall', got {control!r}.")
    grid, tuned = _fusion_grid(retriever, fusion)
    score = score or ("auto" if tuned else "relative")
    entries = load_corpus(*corpus) if corpus and isinstance(corpus[0], str | Path) else list(corpus)  # type: ignore[arg-type]
    if not entries:
        raise InputFileError("The corpus holds no entries.")
    questions = load_qa(qa, answerable_only=True) if isinstance(qa, str | Path) else list(qa)
    qa_name = qa if isinstance(qa, str | Path) else "the qa examples"
    if not questions:
        raise InputFileError(f"{qa_name}: no answerable questions to evaluate.")
    chunk_report: dict[str, Any] | None = None
    if chunking:
        chunked = chunk_corpus(framework, entries, questions, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        entries, questions, chunk_report = list(chunked.chunks), chunked.questions, chunked.report()
    check_gold_in_corpus(questions, {e.id for e in entries}, qa_name)
    labels = question_groups(questions, group_by, qa_name) if group_by is not None else None
    t0 = time.perf_counter()
    bundles = build_hosts(framework, retriever, entries, grid=grid, pool_size=pool_size, client=client)
    t_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    observations = {
        c: collect_observations(questions, b.fetch, progress=progress and i == 0)  # one bar is enough
        for i, (c, b) in enumerate(bundles.items())
    }
    t_query = time.perf_counter() - t0
    rows, tuning = evaluate_observations(
        observations, alphas, tuned=tuned, score=score, trials=trials, seed=seed, pac_delta=pac_delta
    )
    base = observations.get(DEFAULT_FUSION, observations.get(None)) or next(iter(observations.values()))
    report = {
        "n_questions": len(questions),
        "n_corpus": len(entries),
        "framework": framework,
        "retriever": retriever,
        "score": score,
        "fusion": "tuned" if tuned else (grid[0].key if retriever == "hybrid" else None),
        "fusion_grid": [c.key for c in grid] if tuned else None,
        "pool_size": pool_size,
        "chunking": chunk_report,
        "n_pool_misses": sum(1 for o in base if not o.gold_positions),
        "recall_at_1": sum(1 for o in base if 0 in o.gold_positions) / max(1, len(base)),
        "seconds_index": round(t_index, 2),
        "seconds_queries": round(t_query, 2),
        "tuning": tuning or None,
        "results": rows,
    }
    if labels is not None:
        report["groups"] = groups_block(base, labels, alphas, score=score, trials=trials, seed=seed, group_by=group_by)
    if control == "recall":
        from .recall_rows import recall_report

        recall_rows, recall_info = recall_report(
            base, alphas, score=score, trials=trials, seed=seed, ltt_delta=pac_delta
        )
        report["results"] = rows + recall_rows
        report["control"] = "recall"
        report["recall"] = recall_info
    if json_out is not None:
        atomic_write_text(json_out, json.dumps(report, indent=2) + "\n")
    return report
