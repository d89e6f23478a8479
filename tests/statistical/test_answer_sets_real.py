"""End-to-end validity on cached real samples (Gemma 3 270M answers, real hybrid retrieval scores)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.apps.answer_eval import evaluate_methods, prepare_rows

pytestmark = pytest.mark.statistical

SAMPLES = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "squad_gemma_samples.jsonl"
TRIALS = 40


@pytest.fixture(scope="module")
def questions():
    rows = [json.loads(line) for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line]
    return prepare_rows(rows)


def _tolerance(alpha: float, n_test: int) -> float:
    # per-split sd from the test draw and the calibration draw (both ~binomial), averaged over
    # TRIALS overlapping splits (conservatively counted as TRIALS / 4 independent ones), 3 sigma
    per_split = math.sqrt(2 * alpha * (1 - alpha) / n_test)
    return 3 * per_split / math.sqrt(TRIALS / 4)


def test_generator_scores_keep_misses(questions) -> None:
    scores = np.array([q.r_gen for q in questions])
    ceiling = np.isfinite(scores).mean()
    assert 0.3 < ceiling < 1.0, "the 270M model misses some questions; misses must be kept as +inf, not dropped"
    assert len(scores) == len(questions)


@pytest.mark.parametrize("alpha", [0.7, 0.8])
def test_bonferroni_and_pac_cover_end_to_end(questions, alpha: float) -> None:
    rows = {
        r["method"]: r
        for r in evaluate_methods(
            questions, [alpha], methods=("bonferroni", "bonferroni-pac", "hmp"), trials=TRIALS, seed=1
        )
    }
    n_test = len(questions) - len(questions) // 2
    tol = _tolerance(alpha, n_test)
    for method in ("bonferroni", "hmp"):
        assert rows[method]["mean_coverage"] >= 1 - alpha - tol, (method, rows[method])
    # PAC with epsilon = alpha, delta = 0.1: at least 1 - delta of the splits reach 1 - alpha (minus noise)
    assert rows["bonferroni-pac"]["frac_trials_coverage_ge_target"] >= 0.9 - 0.1
    # sets are not trivially everything: the set keeps fewer answers than were sampled for the kept chunks
    assert rows["bonferroni"]["mean_set_size_ans"] < 3 * 6
