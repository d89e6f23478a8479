"""End-to-end validity of every combination method on cached real samples (Gemma 3 270M, dense MiniLM pool).

Every chunk of each question's top-6 pool was sampled (``benchmarks/data/squad_gemma_pool_samples.jsonl``),
so set sizes are exact. The path through the public classes is tested in ``test_conformalizer_shipped.py``;
this file covers the rules the evaluation helpers offer (Bonferroni, PAC, HMP and their BO variants).

Tolerance: conditional on the 200 questions, the mean coverage over random 50/50 splits is >= 1 - alpha
exactly (a random split is an exchangeable draw from them), so the only noise is Monte Carlo over the
``TRIALS`` splits: three standard errors, the per-split sd bounded by the stages' Beta sds (union bound)
plus the binomial sd of the test half.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformal_rag_plugins.core.quantile import conformal_rank
from conformal_rag_plugins.evaluation.answer_set_trials import evaluate_methods, prepare_rows

pytestmark = pytest.mark.statistical

TRIALS = 40
M = 6


@pytest.fixture(scope="module")
def questions(replay_rows):
    return prepare_rows(replay_rows, n_samples=M)


def _beta_sd(n: int, alpha: float) -> float:
    k = conformal_rank(n, alpha)
    return math.sqrt(k * (n + 1 - k) / ((n + 1) ** 2 * (n + 2)))


def _tolerance(alpha: float, n_cal: int, n_test: int) -> float:
    sd = 2 * _beta_sd(n_cal, alpha / 2) + math.sqrt(alpha * (1 - alpha) / n_test)
    return 3 * sd / math.sqrt(TRIALS)


def test_generator_scores_keep_misses(questions) -> None:
    scores = np.array([q.r_gen for q in questions])
    ceiling = np.isfinite(scores).mean()
    assert 0.3 < ceiling < 1.0, "the 270M model misses some questions; misses must be kept as +inf, not dropped"
    assert len(scores) == len(questions) == 200
    assert all(len(q.chunk_ids) == 6 for q in questions)


@pytest.mark.parametrize("alpha", [0.6, 0.7])
def test_methods_cover_end_to_end_with_sets_smaller_than_everything(questions, alpha: float) -> None:
    rows = {
        r["method"]: r
        for r in evaluate_methods(
            questions, [alpha], methods=("bonferroni", "bonferroni-pac", "hmp", "bonferroni-bo"), trials=TRIALS, seed=1
        )
    }
    n_cal = len(questions) // 2
    tol = _tolerance(alpha, n_cal, len(questions) - n_cal)
    for method in ("bonferroni", "hmp"):
        assert rows[method]["mean_coverage"] >= 1 - alpha - tol, (method, rows[method], tol)
    # BO calibrates on half as many questions (the other half chooses the split)
    assert rows["bonferroni-bo"]["mean_coverage"] >= 1 - alpha - _tolerance(alpha, n_cal // 2, n_cal), rows
    # PAC with epsilon = alpha, delta = 0.1: at least 1 - delta of the splits reach 1 - alpha (minus noise)
    assert rows["bonferroni-pac"]["frac_trials_coverage_ge_target"] >= 0.9 - 3 * math.sqrt(0.09 / TRIALS)
    # a size check that keeping every sampled answer of the pool fails
    everything = np.mean([len(_all_clusters(q)) for q in questions])
    for method in ("bonferroni", "hmp", "bonferroni-bo"):
        assert rows[method]["mean_set_size_sem"] <= 0.6 * everything, (method, rows[method], everything)


def _all_clusters(q):
    from conformal_rag_plugins.core.clustering import merge_clusters

    return merge_clusters({c: q.clusters[c] for c in q.chunk_ids})
