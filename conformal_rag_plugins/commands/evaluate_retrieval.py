"""``conformal-rag evaluate``: repeated-split coverage and set size on corpus/qa JSONL files."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.config_search import evaluate_tuned_splits, larger_pools_eligible
from ..core.errors import ConformalError, InputFileError, PoolMissWarning
from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..core.pools import PoolObservation
from ..core.retrieval_scores import SCORE_FAMILIES
from ..core.splits import RandomSplits
from ..core.validation import check_alpha
from ..datasets.examples import CalibrationExample, CorpusEntry, load_corpus
from ..evaluation.retrieval_trials import evaluate_splits
from ..retrieval.parent_pools import lift_gold_to_parents
from ..runtime.atomic import atomic_write_text
from ..tuning.fusion_config import DEFAULT_FUSION_GRID
from ..tuning.tuned_calibration import FusionConfig
from .chunk_corpus import chunk_corpus
from .evaluate_groups import groups_block, question_groups
from .input_checks import (
    announce_questions,
    check_at_least,
    check_gold_in_corpus,
    check_outputs,
    check_pool_option,
    check_trials,
    read_questions,
)
from .levels import with_confidence_levels
from .unit_candidates import Candidates, CandidateSpace, collect_candidates, resolve_units
from .unit_report import describe_choice, fixed_settings_block, mean_unit_tokens, pool_miss_notes

#: The fixed fusion setting used when a hybrid host is not tuned, and as the baseline when it is.
DEFAULT_FUSION = FusionConfig("zscore", DEFAULT_DENSE_WEIGHT)


@dataclass(frozen=True)
class TrialSettings:
    """How :func:`evaluate_observations` evaluates.

    ``score="auto"`` lets the tuned row choose the family (fixed rows then use ``relative``);
    ``pac_delta`` adds ``pac`` rows (and ``ltt`` in the recall report); ``objective`` (``size`` or
    ``tokens``) is what the tuned row minimises on the optimisation part.

    Examples
    --------
    >>> TrialSettings(tuned=True, score="auto", trials=20, seed=0).objective
    'size'
    """

    tuned: bool
    score: str
    trials: int
    seed: int
    pac_delta: float | None = None
    topk: Sequence[int] = (1, 5, 10)
    objective: str = "size"


def evaluate_observations(
    observations: dict[Any, list[PoolObservation]],
    alphas: Sequence[float],
    settings: TrialSettings,
    *,
    base_key: Any = None,
    base_of: dict[str, str] | None = None,
    chunk_keys: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows for every alpha, plus the tuning choices when ``tuned``.

    Fixed hosts: ``split`` (and ``pac``), ``topk@k``, ``conflare`` on ``base_key`` (default
    :data:`DEFAULT_FUSION` for a tuned hybrid). Tuned hybrids add a ``tuned`` row, chosen inside every
    trial on an optimisation part minimising ``objective``; ``base_of`` lets larger pools compete only
    when the base pool misses more than alpha/2 of the optimisation questions. ``chunk_keys`` adds a
    ``tuned-chunks`` row (the earlier chunk-level, base-pool, smallest-set tuning) for comparison.
    """
    tuned, score, trials, seed = settings.tuned, settings.score, settings.trials, settings.seed
    pac_delta, topk, objective = settings.pac_delta, settings.topk, settings.objective
    if base_key is None:
        base_key = DEFAULT_FUSION if DEFAULT_FUSION in observations else None
    base = observations.get(base_key)
    if base is None:
        base = next(iter(observations.values()))
    fixed_family = "relative" if score == "auto" and tuned else score
    rows: list[dict[str, Any]] = []
    tuning: dict[str, Any] = {}
    families = SCORE_FAMILIES if score == "auto" else (score,)
    splits = RandomSplits(trials=trials, seed=seed)
    for alpha in alphas:
        for summary in evaluate_splits(base, alpha, family=fixed_family, splits=splits, pac_delta=pac_delta, topk=topk):
            rows.append(summary.as_row())
        if tuned:
            by_key = {_key(c): obs for c, obs in observations.items() if c is not None}
            summary, choices = evaluate_tuned_splits(
                by_key, alpha, families=families, splits=splits, objective=objective, base_of=base_of
            )
            rows.append(summary.as_row())
            tuning[f"{alpha:g}"] = {
                "most_chosen": choices.most_common(1)[0][0],
                "choices": dict(choices.most_common()),
            }
            if chunk_keys is not None:
                old, _ = evaluate_tuned_splits(
                    {k: by_key[k] for k in chunk_keys}, alpha, families=families, splits=splits
                )
                rows.append(replace(old, method="tuned-chunks").as_row())
    return rows, tuning


def _key(config: Any) -> str:
    return config.key if isinstance(config, FusionConfig) else str(config)


def _fusion_grid(retriever: str, fusion: str) -> tuple[list[FusionConfig], bool]:
    if retriever != "hybrid":
        return [DEFAULT_FUSION], False
    if fusion == "tuned":
        grid = list(DEFAULT_FUSION_GRID)
        if DEFAULT_FUSION not in grid:
            grid.append(DEFAULT_FUSION)
        return grid, True
    return [FusionConfig.parse(fusion)], False


def _pool_sizes(pool_size: int, pool_sizes: Sequence[int] | None, tuned: bool) -> list[int]:
    if pool_sizes is None:
        return [pool_size, 2 * pool_size, 4 * pool_size] if tuned else [pool_size]
    sizes = [int(p) for p in pool_sizes]
    for p in sizes:
        check_pool_option("pool size", p)
    return [pool_size, *sorted({p for p in sizes if p != pool_size})]


@dataclass(frozen=True)
class EvaluateRequest:
    """The options of ``conformal-rag evaluate`` (see :func:`run_evaluate`); ``alphas`` are ``1 - confidence_level``.

    Examples
    --------
    >>> request = EvaluateRequest(["corpus.jsonl"], "qa.jsonl", [0.1], trials=20)
    >>> request.fusion, request.unit
    ('tuned', 'auto')
    """

    corpus: Sequence[str | Path] | Sequence[CorpusEntry]
    qa: str | Path | Sequence[CalibrationExample]
    alphas: Sequence[float]
    trials: int = 100
    seed: int = 0
    score: str | None = None
    pac_delta: float | None = None
    retriever: str = "hybrid"
    framework: str = "llamaindex"
    pool_size: int = 50
    fusion: str = "tuned"
    chunking: bool = True
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    json_out: str | Path | None = None
    group_by: str | None = None
    control: str = "coverage"
    unit: str = "auto"
    pool_sizes: Sequence[int] | None = None


def run_evaluate(request: EvaluateRequest, *, progress: bool = True, client: Any = None) -> dict[str, Any]:
    """Run the evaluation and return (and optionally write) the JSON report.

    Request fields that need a word (the CLI help documents the rest):

    - ``score``: default ``auto`` for a tuned hybrid (chosen with the fusion), else ``relative``.
    - ``fusion``: ``"tuned"`` searches ``DEFAULT_FUSION_GRID`` on optimisation splits;
      ``"zscore:0.5"`` etc. fixes it.
    - ``group_by``: a qa field known at query time; adds a ``groups`` block (pooled vs per-group
      Mondrian threshold over the same trials, :func:`~.evaluate_groups.groups_block`).
    - ``control="recall"``: adds ``crc`` (and ``ltt`` with ``pac_delta``) and ``single-gold`` rows and
      the keys ``control`` and ``recall`` (:func:`~.recall_rows.recall_report`); ``coverage`` keeps
      the report unchanged.
    - ``unit``: what is returned and counts as gold (:mod:`.unit_candidates`); ``auto`` lets a tuned
      hybrid choose by mean context tokens per trial; other hosts use chunks.
    - ``pool_sizes``: default ``pool_size``, or 1x, 2x, 4x it for a tuned hybrid.

    Every row carries ``mean_context_tokens`` (MiniLM tokens of the returned units); a tuned hybrid
    adds ``candidates`` (every fixed setting, same trials) and ``best_fixed`` (best in hindsight).

    Raises
    ------
    ConformalError
        Before any indexing: a bad alpha, ``trials`` or ``pool_size`` below 1, a malformed corpus or
        qa file (``InputFileError``, file and line), an unknown ``context_id``, no answerable question.
    OSError
        ``json_out`` cannot be written.
    """
    r = request
    trials, seed = r.trials, r.seed
    alphas = [check_alpha(a) for a in r.alphas]
    check_trials(trials)
    check_pool_option("pool_size", r.pool_size)
    check_at_least("seed", seed, 0)
    check_outputs(files=[r.json_out], inputs=[*r.corpus, r.qa])
    if r.control not in ("coverage", "recall"):
        raise ConformalError(f"control must be 'coverage' or 'recall', got {r.control!r}.")
    grid, tuned = _fusion_grid(r.retriever, r.fusion)
    score = r.score or ("auto" if tuned else "relative")
    pools = _pool_sizes(r.pool_size, r.pool_sizes, tuned)
    entries = load_corpus(*r.corpus) if r.corpus and isinstance(r.corpus[0], str | Path) else list(r.corpus)  # type: ignore[arg-type]
    if not entries:
        raise InputFileError("The corpus holds no entries.")
    question_file = read_questions(r.qa, "qa") if isinstance(r.qa, str | Path) else None
    questions = question_file.labelled() if question_file is not None else list(r.qa)  # type: ignore[arg-type]
    qa_name = r.qa if isinstance(r.qa, str | Path) else "the qa examples"
    if not questions:
        raise InputFileError(f"{qa_name}: no answerable questions to evaluate.")
    chunk_report: dict[str, Any] | None = None
    chunked = None
    if r.chunking:
        chunked = chunk_corpus(r.framework, entries, questions, chunk_size=r.chunk_size, chunk_overlap=r.chunk_overlap)
        chunk_report = chunked.report()
        # labelled lines may name chunks, SQuAD-style ones documents: an id that is neither is still an id
        # here (map_gold_to_chunks keeps it), so this one check refuses it
        check_gold_in_corpus(chunked.questions, {e.id for e in chunked.chunks}, qa_name)
        # the document and parent units count a chunk's document as gold
        questions = lift_gold_to_parents(questions, {c.id: c.parent_id for c in chunked.chunks})
    else:
        check_gold_in_corpus(questions, {e.id for e in entries}, qa_name)
    units = resolve_units(r.unit, tuned=tuned, any_split=chunked is not None and chunked.n_split_entries > 0)
    labels = question_groups(questions, r.group_by, qa_name) if r.group_by is not None else None
    if question_file is not None:
        unanswerable = "evaluating the answerable ones" if question_file.n_unanswerable else ""
        announce_questions(question_file, unanswerable)
    configs: list[FusionConfig | None] = list(grid) if r.retriever == "hybrid" else [None]
    first = pools if r.pool_sizes is not None else pools[:1]

    def collect(sizes: Sequence[int]) -> Candidates:
        return collect_candidates(
            r.framework,
            r.retriever,
            entries,
            questions,
            chunked,
            space=CandidateSpace(units=units, grid=configs, pool_sizes=sizes),
            client=client,
            progress=progress,
        )

    candidates = collect(first)
    seconds = (candidates.seconds_index, candidates.seconds_queries)
    larger = "given" if r.pool_sizes is not None else "none"
    if len(first) < len(pools):
        # A larger pool competes only in a trial whose optimisation part misses more than alpha/2 at the base
        # pool; when no trial does, the tuned result is the same without retrieving them.
        if larger_pools_eligible(candidates.observations, min(alphas), splits=RandomSplits(trials=trials, seed=seed)):
            candidates = collect(pools)
            seconds = (seconds[0] + candidates.seconds_index, seconds[1] + candidates.seconds_queries)
            larger = "retrieved: the base pool missed more than alpha/2 in some trial"
        else:
            larger = "not retrieved: no trial's base pool missed more than alpha/2, so they could not compete"
            pools = first
    base_unit = "chunk" if r.unit == "auto" else r.unit
    base_config = DEFAULT_FUSION if r.retriever == "hybrid" and tuned else configs[0]
    base_key = candidates.key_of(base_unit, base_config, pools[0])
    by_key = candidates.observations
    chunk_keys = [k for k, st in candidates.settings.items() if st["unit"] == "chunk" and st["pool_size"] == pools[0]]
    several = len(units) > 1 or len(pools) > 1
    rows, tuning = evaluate_observations(
        dict(by_key),
        alphas,
        TrialSettings(tuned=tuned, score=score, trials=trials, seed=seed, pac_delta=r.pac_delta, objective="tokens"),
        base_key=base_key,
        base_of=candidates.base_of,
        chunk_keys=chunk_keys if tuned and several else None,
    )
    for info in tuning.values():
        info.update(describe_choice(info["most_chosen"], candidates.settings))
    base = by_key[base_key]
    notes = pool_miss_notes(candidates, base_key, alphas)
    for note in notes:
        warnings.warn(note, PoolMissWarning, stacklevel=2)
    report = {
        "n_questions": len(questions),
        "question_format": question_file.form if question_file is not None else None,
        "n_corpus": len(chunked.chunks) if chunked is not None else len(entries),
        "framework": r.framework,
        "retriever": r.retriever,
        "score": score,
        "fusion": "tuned" if tuned else (grid[0].key if r.retriever == "hybrid" else None),
        "fusion_grid": [c.key for c in grid] if tuned else None,
        "pool_size": r.pool_size,
        "chunking": chunk_report,
        "n_pool_misses": sum(1 for o in base if not o.gold_positions),
        "recall_at_1": sum(1 for o in base if 0 in o.gold_positions) / max(1, len(base)),
        "seconds_index": round(seconds[0], 2),
        "seconds_queries": round(seconds[1], 2),
        "tuning": tuning or None,
        "results": rows,
        "unit": r.unit,
        "units": units,
        "pool_sizes": list(pools),
        "larger_pools": larger,
        "objective": "tokens" if tuned else None,
        "base_setting": base_key,
        "mean_unit_tokens": mean_unit_tokens(candidates),
        "pool_misses": candidates.miss_shares(),
        "warnings": notes,
    }
    if tuned:
        report["candidates"], report["best_fixed"] = fixed_settings_block(
            by_key, alphas, families=SCORE_FAMILIES if score == "auto" else (score,), trials=trials, seed=seed
        )
    if labels is not None:
        report["groups"] = groups_block(
            base, labels, alphas, score=score, trials=trials, seed=seed, group_by=r.group_by
        )
    if r.control == "recall":
        from .recall_rows import recall_report

        recall_rows, recall_info = recall_report(
            base, alphas, score=score, trials=trials, seed=seed, ltt_delta=r.pac_delta
        )
        report["results"] = rows + recall_rows
        report["control"] = "recall"
        report["recall"] = recall_info
    with_confidence_levels(report["results"])
    if r.json_out is not None:
        atomic_write_text(r.json_out, json.dumps(report, indent=2) + "\n")
    return report
