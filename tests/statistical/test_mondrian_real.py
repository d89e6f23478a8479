"""Within-group coverage of per-group (Mondrian) thresholds on the bundled SQuAD subset, groups by article.

Host retrieval runs once per question (the session's pool observations); 400 seeded random
calibration/test splits are then simulated in numpy. Split conformal is valid conditionally on
the data's multiset under a random split, so each group's mean coverage over the splits must be
at least 1 - alpha up to Monte-Carlo error. NEGATIVE CONTROL: the pooled threshold, valid only
over all groups together, fails the same check for at least one article (measured: Normans,
about 0.83 at alpha = 0.1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformal_rag_plugins.core.mondrian_trials import simulate_group_splits

ALPHA = 0.1
TRIALS = 400
SEED = 20261124

pytestmark = pytest.mark.integration


def _tolerance(n_group: int) -> float:
    """3 standard errors of a mean over TRIALS of a group's coverage (binomial test and calibration parts)."""
    half = n_group / 2
    return 3 * math.sqrt(ALPHA * (1 - ALPHA) * (1 / half + 1 / half) / TRIALS)


@pytest.fixture(scope="module")
def article_trials(observations_factory, squad_questions):
    obs = observations_factory("llamaindex", "hybrid")
    articles = [ex.gold_ids[0].split("#")[0] for ex in squad_questions]
    return simulate_group_splits(obs, articles, ALPHA, family="relative", trials=TRIALS, seed=SEED)


def test_every_article_is_covered_within_the_group_and_pooled_is_not(article_trials) -> None:
    res = article_trials
    assert len(res.groups) == 5 and res.n.min() >= 90
    assert not res.fallback.any()  # every article has ~48+ calibration questions: its own threshold
    per_group = np.nanmean(res.coverage_group, axis=0)
    pooled = np.nanmean(res.coverage_pooled, axis=0)
    tol = np.array([_tolerance(int(n)) for n in res.n])
    ok = per_group >= 1 - ALPHA - tol
    assert ok.all(), dict(zip(res.groups, per_group.round(4), strict=True))
    # negative control: the pooled threshold leaves at least one article under 1 - alpha by more than the tolerance
    failing = [g for g, c, t in zip(res.groups, pooled, tol, strict=True) if c < 1 - ALPHA - t]
    assert failing, dict(zip(res.groups, pooled.round(4), strict=True))
    assert "Normans" in failing
    # the price: the worst-covered article needs a larger set under its own threshold
    worst = int(np.argmin(pooled))
    assert np.nanmean(res.size_group[:, worst]) > np.nanmean(res.size_pooled[:, worst])
