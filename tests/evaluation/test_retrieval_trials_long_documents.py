"""Long documents on the real stack: chunking keeps the guarantee valid and the sets small.

The bundled paragraphs are joined 6 at a time into 199 documents of about 670 MiniLM
tokens (``local/long_documents.py``), chunked to the 254-token window with each
framework's own splitter, and the gold moves to the chunks that hold a reference
answer. The tuned hybrid (fusion method, dense weight and score family chosen on an
optimisation part of each calibration half) is then re-split ``TRIALS`` times.

Tolerance: as in ``tests/evaluation/test_retrieval_trials.py``, each trial's test-half
coverage is BetaBinomial(n_test, k, n_cal + 1 - k) / n_test without ties, where n_cal is
the calibration half *minus* its optimisation part (the threshold never sees the
latter), and the mean over T trials gets ``Z * max(sd_theory, sample sd) / sqrt(T)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformal_rag_plugins.core.config_search import evaluate_tuned_splits
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.evaluation.retrieval_trials import evaluate_splits

pytestmark = [pytest.mark.integration, pytest.mark.statistical]

TRIALS = 100
SEED = 515
Z = 3.0
ALPHAS = (0.05, 0.1, 0.2)
FRAMEWORKS = ("llamaindex", "langchain")
#: Issue 5: the long-document set should stay within about 1.5x of the short-passage set.
SIZE_RATIO_LIMIT = 1.5


@pytest.fixture(scope="module")
def long_stack(long_hybrid_stack):
    """``long_stack(framework)`` -> (ChunkedCorpus, {config key: observations}), built once per framework."""

    def get(framework: str):
        chunked, _, obs = long_hybrid_stack(framework)
        return chunked, obs

    return get


def _sd_theory(k: int, n_cal: int, n_test: int) -> float:
    a, b = k, n_cal + 1 - k
    return math.sqrt(a * b * (a + b + n_test) / (n_test * (a + b) ** 2 * (a + b + 1)))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_long_documents_are_chunked_within_the_window(long_stack, framework) -> None:
    chunked, _ = long_stack(framework)
    report = chunked.report()
    assert report["n_entries"] == 199 and report["n_split_entries"] >= 190
    assert report["max_chunk_tokens"] <= 254 == report["chunk_size"]
    gold = chunked.gold
    assert gold.n_examples == 705 and gold.n_unsplit + gold.n_answer_in_chunk + gold.n_fallback == 705
    assert gold.n_fallback <= 5, gold  # SQuAD answers are spans of their paragraph, so they are found again
    assert all(
        q.metadata["gold_rule"] in ("answer-in-chunk", "all-chunks-fallback", "unsplit") for q in chunked.questions
    )


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tuned_hybrid_covers_on_long_documents(long_stack, framework, alpha) -> None:
    """Mean test coverage of the tuned protocol >= 1 - alpha - tol over TRIALS random splits."""
    _, obs = long_stack(framework)
    summary, choices = evaluate_tuned_splits(obs, alpha, splits=RandomSplits(trials=TRIALS, seed=SEED))
    n = len(next(iter(obs.values())))
    n_half = round(n * 0.5)
    n_cal = n_half - round(n_half * 0.3)
    n_test = n - n_half
    k = int(conformal_quantile(np.arange(n_cal, dtype=float), alpha)) + 1
    cov = np.asarray(summary.coverages)
    tol = Z * max(_sd_theory(k, n_cal, n_test), float(cov.std(ddof=1))) / math.sqrt(cov.size)
    assert tol < 0.02, tol  # the test must stay able to fail: 3 SE of the mean is well under alpha
    assert cov.mean() >= 1 - alpha - tol, (cov.mean(), 1 - alpha, tol, choices)
    assert sum(choices.values()) == TRIALS


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_long_document_sets_stay_near_the_short_passage_sets(long_stack, observations_factory, framework) -> None:
    """At alpha = 0.1 the tuned set over chunks stays within 1.5x of the default set over the short passages."""
    _, obs = long_stack(framework)
    tuned, _ = evaluate_tuned_splits(obs, 0.1, splits=RandomSplits(trials=TRIALS, seed=SEED))
    short = next(
        s
        for s in evaluate_splits(
            observations_factory(framework, "hybrid"), 0.1, splits=RandomSplits(trials=TRIALS, seed=SEED), topk=()
        )
        if s.method == "split"
    )
    long_size, short_size = float(np.mean(tuned.mean_sizes)), float(np.mean(short.mean_sizes))
    assert long_size <= SIZE_RATIO_LIMIT * short_size, (long_size, short_size)
