"""Repeated-split evaluation of end-to-end answer sets on pre-sampled answers (``benchmarks/collect_samples.py`` rows).

Each trial splits questions into calibration and test halves; BO variants split the calibration
half again into an optimisation part (choosing only the alpha split or HMP weight) and a disjoint
part for the final thresholds. ``bonferroni-bo-held-out`` also chooses both stages' miss bounds there
(``SplitOptions(generator_miss_bound="held-out")``): what lets a weak generator's threshold be finite.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..answer_sets.options import SplitOptions
from ..answer_sets.split_optimisation import SplitQuestion, answer_sets, choose_split, make_rule
from ..core.answer_metrics import evaluate_answer_set
from ..core.clustering import cluster_answers
from ..core.errors import CoverageCeilingWarning
from ..core.generation_scores import generation_score
from ..core.retrieval_scores import candidate_nonconformity, nonconformity

METHODS = (
    "bonferroni",
    "bonferroni-bo",
    "hmp",
    "hmp-bo",
    "bonferroni-pac",
    "bonferroni-bo-pac",
    "bonferroni-bo-held-out",
)
HELD_OUT_SUFFIX = "-held-out"
"""A BO method whose stage miss bounds are also chosen on the optimisation part."""

PreparedQuestion = SplitQuestion
"""One question with clustered samples and both stages' calibration scores (old name)."""


def sampled_pool_size(rows: Sequence[dict[str, Any]], pool: int | None = None) -> int:
    """The largest pool every row has fully sampled (capped at ``pool``).

    Rows sampled for few top chunks (older files) get a small pool: candidates beyond it count as
    outside the pool, so set sizes stay exact.
    """
    sizes = []
    for row in rows:
        n = 0
        for p in row["pool"]:
            if p["id"] not in row["samples"]:
                break
            n += 1
        sizes.append(n)
    size = min(sizes) if sizes else 0
    size = size if pool is None else min(size, int(pool))
    if size < 1:
        raise ValueError("No row has its top pool chunk sampled: answer-set evaluation needs every pool chunk sampled.")
    return size


def prepare_rows(
    rows: Sequence[dict[str, Any]],
    *,
    family: str = "relative",
    n_samples: int | None = None,
    method: str = "rougeL",
    tau: float = 0.7,
    pool: int | None = None,
    generator_score: str = "frequency",
) -> list[SplitQuestion]:
    """Cluster every (question, chunk) sample list once and compute both stages' calibration scores.

    The pool is each row's top ``sampled_pool_size(rows, pool)`` candidates; the generator score is
    taken on the gold defining the retrieval score (best-ranked gold in the pool, else the first).
    ``generator_score="likelihood"`` breaks frequency ties with each sample's mean token ``logprobs``.
    """
    size = sampled_pool_size(rows, pool)
    out = []
    for row in rows:
        ids = [p["id"] for p in row["pool"]][:size]
        scores = np.array([p["score"] for p in row["pool"]], dtype=float)[:size]
        gold_set = set(row["gold_ids"])
        gold = [i for i, cid in enumerate(ids) if cid in gold_set]
        logprobs = row.get("logprobs", {})
        clusters = {
            cid: cluster_answers(
                row["samples"][cid],
                method=method,
                tau=tau,
                n_samples=n_samples,
                chunk_id=cid,
                logprobs=logprobs.get(cid),
                score=generator_score,
            )
            for cid in row["samples"]
        }
        gold_id = ids[gold[0]] if gold else row["gold_ids"][0]
        tokens = row.get("tokens", {})
        out.append(
            SplitQuestion(
                id=row["id"],
                question=row.get("question", ""),
                answers=tuple(row["answers"]),
                chunk_ids=tuple(ids),
                chunk_nonconformity=candidate_nonconformity(family, scores),
                r_ret=nonconformity(family, scores, gold),
                r_gen=generation_score(clusters[gold_id], row["answers"]),
                clusters=clusters,
                tokens=tuple(int(sum(v[k] for v in tokens.values())) for k in (0, 1)) if tokens else (0, 0),
            )
        )
    return out


def evaluate_methods(
    questions: Sequence[PreparedQuestion],
    alphas: Sequence[float],
    *,
    methods: Sequence[str] = METHODS,
    trials: int = 20,
    seed: int = 0,
    delta: float = 0.1,
    bo_calls: int = 12,
    merge: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Rows ``{"alpha", "method", "mean_coverage", "mean_set_size_{ans,ext,rou,sem}", ...}``.

    ``finite_thresholds`` (twin: ``frac_trials_guaranteed``) is the share of trials whose rule is
    guaranteed: both thresholds finite (Bonferroni/PAC), or no missed stage rejected (HMP). BO
    variants choose on half the calibration half, penalising non-guaranteed splits.
    """
    penalty = float(max(len(q.chunk_ids) for q in questions) * max(1, _m(questions)))
    rng = np.random.default_rng(seed)
    n = len(questions)
    rows = []
    acc: dict[tuple[float, str], dict[str, list[float]]] = {}
    for _ in range(trials):
        perm = rng.permutation(n)
        cal = [questions[i] for i in perm[: n // 2]]
        test = [questions[i] for i in perm[n // 2 :]]
        opt, final = cal[: len(cal) // 2], cal[len(cal) // 2 :]
        for alpha in alphas:
            for method in methods:
                extra: dict[str, float] = {}
                if "-bo" in method:
                    held_out = method.endswith(HELD_OUT_SUFFIX)
                    bounds = ("held-out", "held-out") if held_out else (None, None)
                    split = SplitOptions(
                        method=method.removesuffix(HELD_OUT_SUFFIX).replace("-bo", ""),
                        delta=delta,
                        bo_calls=bo_calls,
                        retrieval_miss_bound=bounds[0],
                        generator_miss_bound=bounds[1],
                    )
                    with warnings.catch_warnings():  # an infeasible trial shows as a non-guaranteed row
                        warnings.simplefilter("ignore", CoverageCeilingWarning)
                        choice = choose_split(
                            opt, alpha, split=split, penalty=penalty, merge=merge, n_calibration=len(final)
                        )
                    a_ret, w = choice.get("alpha_retrieval"), choice.get("hmp_weight", 0.5)
                    chosen = (choice.get("miss_bound_retrieval"), choice.get("miss_bound_generation"))
                    rule = make_rule(
                        method.removesuffix(HELD_OUT_SUFFIX),
                        [q.r_ret for q in final],
                        [q.r_gen for q in final],
                        alpha,
                        a_ret=a_ret,
                        w=w,
                        delta=delta,
                        miss_bounds=chosen,
                    )
                    extra = {
                        "bo_objective": choice.get("bo_objective", penalty),
                        "equal_objective": choice.get("equal_split_objective", penalty),
                    }
                    extra |= {"w_ret": w} if method.startswith("hmp") else {"alpha_ret": float(a_ret)}
                    if held_out:
                        extra |= {"feasible": float(choice["feasible"])}
                        extra |= {"miss_bound_gen": chosen[1]} if chosen[1] is not None else {}
                else:
                    rule = make_rule(method, [q.r_ret for q in cal], [q.r_gen for q in cal], alpha, delta=delta)
                sets = answer_sets(rule, test, merge=merge)
                metrics = [evaluate_answer_set(s, q.answers) for s, q in zip(sets, test, strict=True)]
                entry = acc.setdefault((alpha, method), {})
                entry.setdefault("coverage", []).append(float(np.mean([m.covered for m in metrics])))
                for k in ("ans", "ext", "rou", "sem"):
                    entry.setdefault(k, []).append(float(np.mean([getattr(m.sizes, k) for m in metrics])))
                entry.setdefault("abstention", []).append(float(np.mean([m.abstains for m in metrics])))
                entry.setdefault("hallucination", []).append(float(np.mean([m.hallucinates for m in metrics])))
                entry.setdefault("finite", []).append(float(rule.guaranteed))
                for k, v in extra.items():
                    entry.setdefault(k, []).append(v)
    for (alpha, method), e in acc.items():
        cov = np.array(e["coverage"])
        row = {
            "alpha": alpha,
            "method": method,
            "mean_coverage": float(cov.mean()),
            "std_coverage": float(cov.std(ddof=1)) if cov.size > 1 else 0.0,
            "frac_trials_coverage_ge_target": float(np.mean(cov >= 1 - alpha)),
            "mean_set_size_ans": float(np.mean(e["ans"])),
            "mean_set_size_ext": float(np.mean(e["ext"])),
            "mean_set_size_rou": float(np.mean(e["rou"])),
            "mean_set_size_sem": float(np.mean(e["sem"])),
            "abstention_rate": float(np.mean(e["abstention"])),
            "hallucination_rate": float(np.mean(e["hallucination"])),
            "finite_thresholds": float(np.mean(e["finite"])),
            "frac_trials_guaranteed": float(np.mean(e["finite"])),
            "trials": len(cov),
        }
        for k in ("alpha_ret", "w_ret", "bo_objective", "equal_objective", "feasible", "miss_bound_gen"):
            if k in e:
                row[f"mean_{k}"] = float(np.mean(e[k]))
        rows.append(row)
    return rows


def evaluate_abstention(
    calibration: Sequence[PreparedQuestion],
    unanswerable: Sequence[PreparedQuestion],
    alphas: Sequence[float],
    *,
    methods: Sequence[str] = ("bonferroni", "hmp", "bonferroni-pac"),
    delta: float = 0.1,
) -> list[dict[str, Any]]:
    """Calibrate on answerable questions, test on unanswerable ones (correct: the set abstains).

    Rows carry ``"subset": "unanswerable"``; ``mean_coverage`` is the share of sets holding "I don't
    know", ``hallucination_rate`` the share answering with something else only.
    """
    rows = []
    for alpha in alphas:
        for method in methods:
            rule = make_rule(method, [q.r_ret for q in calibration], [q.r_gen for q in calibration], alpha, delta=delta)
            sets = answer_sets(rule, unanswerable)
            metrics = [evaluate_answer_set(s, q.answers) for s, q in zip(sets, unanswerable, strict=True)]
            rows.append(
                {
                    "subset": "unanswerable",
                    "alpha": alpha,
                    "method": method,
                    "mean_coverage": float(np.mean([m.covered for m in metrics])) if metrics else 0.0,
                    "mean_set_size_ans": float(np.mean([m.sizes.ans for m in metrics])) if metrics else 0.0,
                    "mean_set_size_ext": float(np.mean([m.sizes.ext for m in metrics])) if metrics else 0.0,
                    "mean_set_size_rou": float(np.mean([m.sizes.rou for m in metrics])) if metrics else 0.0,
                    "mean_set_size_sem": float(np.mean([m.sizes.sem for m in metrics])) if metrics else 0.0,
                    "abstention_rate": float(np.mean([m.abstains for m in metrics])) if metrics else 0.0,
                    "hallucination_rate": float(np.mean([m.hallucinates for m in metrics])) if metrics else 0.0,
                    "trials": 1,
                }
            )
    return rows


def optimise_split(
    optimisation: Sequence[PreparedQuestion],
    alpha: float,
    *,
    method: str = "bonferroni",
    delta: float = 0.1,
    bo_calls: int = 15,
    random_state: int = 0,
) -> dict[str, Any]:
    """Choose the alpha split (Bonferroni/PAC) or HMP weight by BO on the optimisation split only.

    Returns ``{"alpha_retrieval": ...}`` or ``{"hmp_weight": ...}`` plus the objective (mean semantic
    clusters on the optimisation split) for BO's choice and the equal split.
    """
    penalty = float(max(len(q.chunk_ids) for q in optimisation) * max(1, _m(optimisation)))
    split = SplitOptions(method=method, delta=delta, bo_calls=bo_calls, random_state=random_state)
    return choose_split(optimisation, alpha, split=split, penalty=penalty)


def _m(questions: Sequence[PreparedQuestion]) -> int:
    """M, the samples per chunk (the largest cluster member count seen)."""
    return max((sum(c.count for c in cl) for q in questions for cl in q.clusters.values()), default=1)
