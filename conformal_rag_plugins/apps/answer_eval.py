"""Repeated-split evaluation of end-to-end answer sets on pre-sampled answers.

Input rows (as written by ``benchmarks/collect_samples.py``): per question, the host
pool (ids and scores, best first), the reference answers, the gold ids, and ``M``
sampled answers for some chunks (always including the gold chunk). Each trial splits
the questions into calibration and test halves; BO variants split the calibration half
again into an optimisation part (used only to choose the split of alpha or the HMP
weight) and a disjoint part for the final thresholds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.answer_metrics import evaluate_answer_set
from ..core.bo import optimize_alpha_split, optimize_hmp_weight
from ..core.clustering import AnswerCluster, cluster_answers
from ..core.combination import bonferroni_thresholds, decide_end_to_end, harmonic_mean_rule, pac_thresholds
from ..core.errors import InfiniteThresholdWarning
from ..core.generation_scores import generation_score
from ..core.retrieval_scores import candidate_nonconformity, nonconformity

__all__ = [
    "METHODS",
    "PreparedQuestion",
    "evaluate_abstention",
    "evaluate_methods",
    "optimise_split",
    "prepare_rows",
]

METHODS = ("bonferroni", "bonferroni-bo", "hmp", "hmp-bo", "bonferroni-pac", "bonferroni-bo-pac")


@dataclass(frozen=True)
class PreparedQuestion:
    """One question with clustered samples and both stages' calibration scores."""

    id: str
    answers: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    chunk_nonconformity: np.ndarray
    clusters: dict[str, list[AnswerCluster]]
    r_ret: float
    r_gen: float
    tokens: tuple[int, int]


def prepare_rows(
    rows: Sequence[dict[str, Any]],
    *,
    family: str = "relative",
    n_samples: int | None = None,
    method: str = "rougeL",
    tau: float = 0.7,
) -> list[PreparedQuestion]:
    """Cluster every (question, chunk) sample list once and compute the calibration scores."""
    out = []
    for row in rows:
        ids = [p["id"] for p in row["pool"]]
        scores = np.array([p["score"] for p in row["pool"]], dtype=float)
        gold = [i for i, cid in enumerate(ids) if cid in set(row["gold_ids"])]
        nonconf = candidate_nonconformity(family, scores)
        sampled = [cid for cid in ids if cid in row["samples"]]  # chunks whose answers were sampled
        clusters = {
            cid: cluster_answers(row["samples"][cid], method=method, tau=tau, n_samples=n_samples, chunk_id=cid)
            for cid in row["samples"]
        }
        gold_id = row["gold_ids"][0]
        tokens = row.get("tokens", {})
        out.append(
            PreparedQuestion(
                id=row["id"],
                answers=tuple(row["answers"]),
                chunk_ids=tuple(sampled),
                chunk_nonconformity=np.array([nonconf[ids.index(c)] for c in sampled]),
                clusters=clusters,
                r_ret=nonconformity(family, scores, gold),
                r_gen=generation_score(clusters[gold_id], row["answers"]),
                tokens=tuple(int(sum(v[k] for v in tokens.values())) for k in (0, 1)) if tokens else (0, 0),
            )
        )
    return out


def _sets(rule: Any, questions: Sequence[PreparedQuestion]) -> list[list[AnswerCluster]]:
    sets = []
    for q in questions:
        decision = decide_end_to_end(rule, q.chunk_ids, q.chunk_nonconformity, q.clusters)
        sets.append(decision.answer_set(method="rougeL"))
    return sets


def _mean_sem(rule: Any, questions: Sequence[PreparedQuestion]) -> float:
    return float(np.mean([len(s) for s in _sets(rule, questions)]))


def _rule(
    method: str,
    cal: Sequence[PreparedQuestion],
    alpha: float,
    *,
    a_ret: float | None = None,
    w: float = 0.5,
    delta: float = 0.1,
) -> Any:
    ret = [q.r_ret for q in cal]
    gen = [q.r_gen for q in cal]
    if method.startswith("hmp"):
        return harmonic_mean_rule(ret, gen, alpha, w_ret=w)
    a_ret = alpha / 2 if a_ret is None else a_ret
    if method.endswith("pac"):
        return pac_thresholds(ret, gen, alpha, delta, epsilon_ret=a_ret, epsilon_gen=alpha - a_ret)
    return bonferroni_thresholds(ret, gen, alpha, alpha_ret=a_ret, alpha_gen=alpha - a_ret)


def evaluate_methods(
    questions: Sequence[PreparedQuestion],
    alphas: Sequence[float],
    *,
    methods: Sequence[str] = METHODS,
    trials: int = 20,
    seed: int = 0,
    delta: float = 0.1,
    bo_calls: int = 12,
) -> list[dict[str, Any]]:
    """Rows ``{"alpha", "method", "mean_coverage", "mean_set_size_{ans,ext,rou,sem}", ...}``."""
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
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", InfiniteThresholdWarning)
                    extra: dict[str, float] = {}
                    if "-bo" in method and method.startswith("hmp"):
                        res = optimize_hmp_weight(
                            lambda w, a=alpha, o=opt: _mean_sem(_rule("hmp", o, a, w=w), o), n_calls=bo_calls
                        )
                        rule = _rule(method, final, alpha, w=res.value)
                        extra = {
                            "w_ret": res.value,
                            "bo_objective": res.objective,
                            "equal_objective": res.baseline_objective,
                        }
                    elif "-bo" in method:
                        res = optimize_alpha_split(
                            lambda ar, ag, a=alpha, m=method, o=opt: _mean_sem(
                                _rule(m, o, a, a_ret=ar, delta=delta), o
                            ),
                            alpha,
                            n_calls=bo_calls,
                        )
                        rule = _rule(method, final, alpha, a_ret=res.alpha_ret, delta=delta)
                        extra = {
                            "alpha_ret": res.alpha_ret,
                            "bo_objective": res.objective,
                            "equal_objective": res.baseline_objective,
                        }
                    else:
                        rule = _rule(method, cal, alpha, delta=delta)
                metrics = [evaluate_answer_set(s, q.answers) for s, q in zip(_sets(rule, test), test, strict=True)]
                entry = acc.setdefault((alpha, method), {})
                entry.setdefault("coverage", []).append(float(np.mean([m.covered for m in metrics])))
                for k in ("ans", "ext", "rou", "sem"):
                    entry.setdefault(k, []).append(float(np.mean([getattr(m.sizes, k) for m in metrics])))
                entry.setdefault("abstention", []).append(float(np.mean([m.abstains for m in metrics])))
                entry.setdefault("hallucination", []).append(float(np.mean([m.hallucinates for m in metrics])))
                finite = [math.isfinite(getattr(rule, "q_gen", 0.0)), math.isfinite(getattr(rule, "q_ret", 0.0))]
                entry.setdefault("finite", []).append(float(all(finite)))
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
            "trials": len(cov),
        }
        for k in ("alpha_ret", "w_ret", "bo_objective", "equal_objective"):
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
    """Calibrate on answerable questions, then test on unanswerable ones (correct = the set abstains).

    Rows carry ``"subset": "unanswerable"``; ``mean_coverage`` is the share of sets holding
    "I don't know", and ``hallucination_rate`` the share answering with something else only.
    """
    rows = []
    for alpha in alphas:
        for method in methods:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InfiniteThresholdWarning)
                rule = _rule(method, calibration, alpha, delta=delta)
            metrics = [
                evaluate_answer_set(s, q.answers) for s, q in zip(_sets(rule, unanswerable), unanswerable, strict=True)
            ]
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
    """Choose the split of alpha (Bonferroni/PAC) or the HMP weight by BO on an optimisation split only.

    Returns ``{"alpha_retrieval": ...}`` or ``{"hmp_weight": ...}`` plus the objective values
    (mean semantic clusters on the optimisation split for BO's choice and for the equal split).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        if method == "hmp":
            res = optimize_hmp_weight(
                lambda w: _mean_sem(_rule("hmp", optimisation, alpha, w=w), optimisation),
                n_calls=bo_calls,
                random_state=random_state,
            )
            choice: dict[str, Any] = {"hmp_weight": res.value}
        else:
            rule_name = "bonferroni-pac" if method == "pac" else "bonferroni"
            res = optimize_alpha_split(
                lambda ar, ag: _mean_sem(_rule(rule_name, optimisation, alpha, a_ret=ar, delta=delta), optimisation),
                alpha,
                n_calls=bo_calls,
                random_state=random_state,
            )
            choice = {"alpha_retrieval": res.alpha_ret}
    return {
        **choice,
        "bo_objective": res.objective,
        "equal_split_objective": res.baseline_objective,
        "source": res.source,
        "n_optimisation": len(optimisation),
    }
