"""Choose the split of alpha (or the HMP weight) by Bayesian optimisation on an optimisation split.

The objective is the mean number of semantic clusters of the optimisation questions' answer sets,
computed as the shipped synthesizer does, sampling every chunk of each retrieval set (chosen by the
threshold, never the gold; lazily). A candidate whose rule is not guaranteed scores the worst size
``pool * M``. Stage miss bounds set to ``"held-out"`` are chosen here first, on these questions
(:mod:`.miss_bounds`), and the search keeps to the splits that leave each stage's alpha above its
bound. If no split can keep the promise, the result says so (``feasible`` False, a reason and a
:class:`~conformal_rag_plugins.core.errors.CoverageCeilingWarning`) instead of returning the equal
split silently.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ..core.bo import optimize_alpha_split, optimize_hmp_weight
from ..core.clustering import AnswerCluster
from ..core.combination import (
    Rule,
    bonferroni_thresholds,
    decide_end_to_end,
    harmonic_mean_rule,
    pac_thresholds,
)
from ..core.errors import ConformalError, CoverageCeilingWarning, InfiniteThresholdWarning
from ..core.generation_scores import generation_score
from ..core.retrieval_scores import candidate_nonconformity, nonconformity
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.gold_matching import gold_positions
from ..runtime.caller_warning import warn_at_caller
from ..runtime.run_sync import run_sync
from .engine import GeneratorStage, cluster_samples, clustering_kwargs
from .gold import defining_gold, references_of
from .miss_bounds import StageBounds, feasible_retrieval_share, infeasible_message, resolve_bounds
from .options import SplitOptions

ClustersFor = Callable[["SplitQuestion", str], list[AnswerCluster]]


class PoolReader(Protocol):
    """The part of a host the optimisation split reads: scored pools and chunk texts."""

    def fetch(self, question: str) -> Any:
        """The scored candidate pool of ``question``."""
        ...

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        """The text of each chunk id the host knows."""
        ...


@dataclass
class SplitQuestion:
    """One question's pool (best first), both stages' scores and its per-chunk answer clusters (filled lazily)."""

    id: str
    question: str
    answers: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    chunk_nonconformity: np.ndarray
    r_ret: float
    r_gen: float
    clusters: dict[str, list[AnswerCluster]] = field(default_factory=dict)
    chunk_texts: dict[str, str] = field(default_factory=dict, repr=False)
    tokens: tuple[int, int] = (0, 0)


def make_rule(
    method: str,
    ret: Sequence[float],
    gen: Sequence[float],
    alpha: float,
    *,
    a_ret: float | None = None,
    w: float = 0.5,
    delta: float = 0.1,
    miss_bounds: StageBounds = (None, None),
) -> Rule:
    """The combination rule of ``method`` (``bonferroni``, ``pac``/``*-pac``, ``hmp*``) on calibration scores.

    ``miss_bounds``: the stages' pool-miss bounds (Bonferroni/PAC; ``None``: half the stage's alpha).

    >>> make_rule("bonferroni", [0.1] * 20, [-0.5] * 20, 0.2).q_gen
    -0.5
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        if method.startswith("hmp"):
            return harmonic_mean_rule(ret, gen, alpha, w_ret=w)
        a_ret = alpha / 2 if a_ret is None else a_ret
        if method.endswith("pac"):
            return pac_thresholds(ret, gen, alpha, delta, epsilon_split=(a_ret, alpha - a_ret), miss_bounds=miss_bounds)
        return bonferroni_thresholds(ret, gen, alpha, alpha_ret=a_ret, alpha_gen=alpha - a_ret, miss_bounds=miss_bounds)


def _stored(q: SplitQuestion, cid: str) -> list[AnswerCluster]:
    if cid not in q.clusters:
        raise ConformalError(
            f"No sampled answers for chunk {cid!r} of question {q.id!r}: every chunk of the pool must be sampled "
            "for exact set sizes."
        )
    return q.clusters[cid]


def answer_sets(
    rule: Rule,
    questions: Sequence[SplitQuestion],
    *,
    clusters_for: ClustersFor = _stored,
    merge: dict[str, Any] | None = None,
) -> list[list[AnswerCluster]]:
    """The de-duplicated answer set of each question under ``rule`` (samples every retrieval-set chunk)."""
    out = []
    kwargs = merge or {"method": "rougeL"}
    for q in questions:
        keep = rule.retrieval_mask(q.chunk_nonconformity) if q.chunk_ids else np.zeros(0, dtype=bool)
        per = {cid: clusters_for(q, cid) for cid, k in zip(q.chunk_ids, keep, strict=True) if k}
        decision = decide_end_to_end(rule, q.chunk_ids, q.chunk_nonconformity, per)
        out.append(decision.answer_set(**kwargs))
    return out


def mean_semantic_size(
    rule: Rule,
    questions: Sequence[SplitQuestion],
    *,
    penalty: float,
    clusters_for: ClustersFor = _stored,
    merge: dict[str, Any] | None = None,
) -> float:
    """Mean number of semantic clusters, or ``penalty`` when the rule is not guaranteed."""
    if not rule.guaranteed:
        return float(penalty)
    return float(np.mean([len(s) for s in answer_sets(rule, questions, clusters_for=clusters_for, merge=merge)]))


def at_size(scores: Sequence[float], n: int) -> list[float]:
    """``n`` scores with the empirical law of ``scores`` (misses, ``+inf``, at their share, to within ``1/n``).

    What a calibration of ``n`` questions drawn like ``scores`` looks like: the rules built on it have
    that calibration's ranks, miss cap and flag, not those of the (smaller) optimisation split.

    >>> at_size([0.1, 0.2, float("inf")], 6)
    [0.1, 0.1, 0.2, 0.2, inf, inf]
    """
    ordered = np.sort(np.asarray(scores, dtype=float))
    index = ((np.arange(n) + 0.5) * ordered.size / n).astype(int)
    return [float(x) for x in ordered[np.minimum(index, ordered.size - 1)]]


def choose_split(
    questions: Sequence[SplitQuestion],
    alpha: float,
    *,
    split: SplitOptions | None = None,
    penalty: float,
    clusters_for: ClustersFor = _stored,
    merge: dict[str, Any] | None = None,
    n_calibration: int | None = None,
) -> dict[str, Any]:
    """BO of the split of alpha (Bonferroni/PAC) or of the HMP weight on ``questions`` only.

    Each candidate rule is built as a calibration of ``n_calibration`` questions (default: as many as
    ``questions``) drawn like ``questions`` would build it (:func:`at_size`), so whether a split can be
    flagged is judged at the calibration's size, and applied to ``questions``' pools.
    PAC's ``delta`` is 0.1 when unset. ``split.miss_bounds`` are the stages' settings (a number,
    ``None`` or ``"held-out"``, chosen here on ``questions``: ``miss_bound_retrieval`` /
    ``miss_bound_generation`` in the result). Returns the choice, the objective at it and at the
    baseline (the equal split, or the middle of the feasible splits), where the choice came from, and
    ``feasible``: False (with ``infeasible_reason``, and a
    :class:`~conformal_rag_plugins.core.errors.CoverageCeilingWarning`)
    when no split evaluated is guaranteed on these questions.
    """
    split = split or SplitOptions()
    method, delta = split.method, 0.1 if split.delta is None else split.delta
    bo_calls, random_state = split.bo_calls, split.random_state
    ret = [q.r_ret for q in questions]
    gen = [q.r_gen for q in questions]
    confidence, miss_bounds = split.miss_bound_confidence, split.miss_bounds
    bounds = resolve_bounds(miss_bounds, (ret, gen), confidence)  # on the questions themselves
    n_cal = len(questions) if n_calibration is None else int(n_calibration)
    ret, gen = at_size(ret, n_cal), at_size(gen, n_cal)
    record: dict[str, Any] = {
        "n_optimisation": len(questions),
        "n_calibration_judged": n_cal,
        "objective": "mean semantic clusters, every retrieval-set chunk sampled; non-guaranteed splits penalised",
    }
    for stage, setting, bound in zip(("retrieval", "generation"), miss_bounds, bounds, strict=True):
        if setting is not None and bound is not None:
            record[f"miss_bound_{stage}"] = bound
    if any(setting == "held-out" for setting in miss_bounds):
        record["miss_bound_confidence"] = confidence

    def size(rule: Rule) -> float:
        return mean_semantic_size(rule, questions, penalty=penalty, clusters_for=clusters_for, merge=merge)

    if method.startswith("hmp"):
        res = optimize_hmp_weight(
            lambda w: size(make_rule("hmp", ret, gen, alpha, w=w)), n_calls=bo_calls, random_state=random_state
        )
        choice: dict[str, Any] = {"hmp_weight": res.value}
    else:
        name = "bonferroni-pac" if method.endswith("pac") else "bonferroni"
        room = feasible_retrieval_share(alpha, bounds)
        if room is None or not _searchable(alpha, room):
            return _infeasible(record, alpha, questions, bounds, confidence)
        res = optimize_alpha_split(
            lambda ar, ag: size(make_rule(name, ret, gen, alpha, a_ret=ar, delta=delta, miss_bounds=bounds)),
            alpha,
            n_calls=bo_calls,
            random_state=random_state,
            bounds=room,
        )
        choice = {"alpha_retrieval": res.alpha_ret}
    record.update(
        {
            **choice,
            "bo_objective": res.objective,
            "equal_split_objective": res.baseline_objective,
            "source": "feasible" if res.source == "equal" and res.total and res.baseline != alpha / 2 else res.source,
            "feasible": True,
        }
    )
    if all(y >= penalty for _, y in res.evaluations):
        return _infeasible(record, alpha, questions, bounds, confidence)
    return record


def _searchable(alpha: float, room: tuple[float, float]) -> bool:
    """Whether BO's range (1e-3 of alpha from either end) meets the feasible ``room``."""
    return max(1e-3 * alpha, room[0]) < min((1 - 1e-3) * alpha, room[1])


def _infeasible(
    record: dict[str, Any], alpha: float, questions: Sequence[SplitQuestion], bounds: StageBounds, confidence: float
) -> dict[str, Any]:
    """``record`` marked infeasible (the equal split, a reason), warned at the caller's line."""
    misses = (sum(math.isinf(q.r_ret) for q in questions), sum(math.isinf(q.r_gen) for q in questions))
    reason = infeasible_message(alpha, len(questions), misses, bounds, confidence)
    warn_at_caller(reason, CoverageCeilingWarning)
    for stage in ("retrieval", "generation"):  # an unusable bound is kept for the record, not for the rule
        if f"miss_bound_{stage}" in record:
            record[f"held_out_miss_bound_{stage}"] = record.pop(f"miss_bound_{stage}")
    if "hmp_weight" not in record:
        record.setdefault("alpha_retrieval", alpha / 2)
    record.setdefault("source", "infeasible")
    return {**record, "feasible": False, "infeasible_reason": reason}


def optimise_split_on_host(
    examples: Sequence[CalibrationExample],
    host: PoolReader,
    stage: GeneratorStage,
    *,
    alpha: float,
    retrieval: RetrievalCalibration,
    split: SplitOptions,
    n_calibration: int | None = None,
) -> dict[str, Any]:
    """Score the optimisation questions on the host and choose the split (and ``"held-out"`` bounds) on them only.

    ``n_calibration``: the size of the calibration the split is for (see :func:`choose_split`).

    Each generator score comes from the gold chunk defining its retrieval score; sampling is
    synchronous (:func:`~conformal_rag_plugins.runtime.run_sync.run_sync`) as the objective is plain.
    """
    from ..runtime.progress import progress_bar

    family, clustering = retrieval.score_family_, stage.clustering
    kwargs = clustering_kwargs(clustering, None, stage.embed)

    def clusters_of(question: str, text: str, cid: str | None) -> list[AnswerCluster]:
        got = run_sync(stage.sample(question, text))
        return cluster_samples(got, clustering, kwargs, n_samples=stage.n_samples, chunk_id=cid)

    questions = []
    for ex in progress_bar(examples, desc="optimisation split", unit="q", enabled=stage.progress):
        pool = host.fetch(ex.question)
        ids = [c if c is not None else f"candidate-{i}" for i, c in enumerate(pool.ids)]
        positions = gold_positions(ex, pool.ids, pool.texts)
        gold = defining_gold(ex, pool, host.texts_for)
        gold_id = gold.chunk_id or "gold"
        gold_clusters = clusters_of(ex.question, gold.text, gold_id)
        questions.append(
            SplitQuestion(
                id=ex.digest,
                question=ex.question,
                answers=references_of(ex),
                chunk_ids=tuple(ids),
                chunk_nonconformity=candidate_nonconformity(family, pool.scores),
                r_ret=nonconformity(family, pool.scores, positions),
                r_gen=generation_score(gold_clusters, references_of(ex), threshold=stage.match_threshold),
                clusters={gold_id: gold_clusters},
                chunk_texts=dict(zip(ids, pool.texts, strict=True)),
            )
        )

    def lazily(q: SplitQuestion, cid: str) -> list[AnswerCluster]:
        if cid not in q.clusters:
            q.clusters[cid] = clusters_of(q.question, q.chunk_texts[cid], cid)
        return q.clusters[cid]

    merge = {k: v for k, v in kwargs.items() if k in ("method", "tau", "embed")}
    result = choose_split(
        questions,
        alpha,
        split=replace(split, delta=split.delta or 0.1),
        penalty=float(retrieval.pool_size_ * stage.n_samples),
        clusters_for=lazily,
        merge=merge,
        n_calibration=n_calibration,
    )
    result["chunks_sampled"] = sum(len(q.clusters) for q in questions)
    result["retrieval_misses"] = int(sum(math.isinf(q.r_ret) for q in questions))
    result["generator_ceiling"] = sum(math.isfinite(q.r_gen) for q in questions) / max(1, len(questions))
    return result
