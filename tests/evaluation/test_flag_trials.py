"""Issue 33, item 1, through the library: coverage given ``guaranteed`` when the pool can miss the gold.

Seeded simulations (:mod:`conformal_rag_plugins.evaluation.flag_trials`): ``RetrievalConformalizer`` is
calibrated on fresh synthetic pools of 20 whose gold is missing with probability ``alpha/2``, and only
the draws whose threshold is finite (the flag) count. Each rule is checked at the smallest sizes,
where the plain rank's flag is too optimistic, and each has that plain rank as its negative control.
The exact figures over n in {20, 50, 100, 1000} are in ``tests/core/test_quantile_flagged.py``.
"""

from __future__ import annotations

import pytest

from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE
from conformal_rag_plugins.evaluation.flag_trials import (
    simulate_answer_set_flag,
    simulate_flag_coverage,
    simulate_group_flag_coverage,
    simulate_recall_given_flag,
)

pytestmark = pytest.mark.statistical

LEVEL, ALPHA = 0.9, 0.1
MISS = ALPHA / 2


def test_pooled_split_threshold_covers_given_the_flag() -> None:
    now = simulate_flag_coverage(20, LEVEL, MISS, draws=2000, seed=0)
    plain = simulate_flag_coverage(20, LEVEL, MISS, draws=2000, seed=0, rule=PLAIN_RANK_RULE)
    assert now.coverage >= LEVEL - 2.5 * now.se, now
    assert plain.coverage < LEVEL - 3 * plain.se, plain  # the 0.888 at 4% misses
    assert now.mean_size < 20 - 5  # not keep-everything: half the pool or so
    assert now.flag_rate > 0.3


def test_each_group_covers_given_its_own_flag() -> None:
    """Per-group (Mondrian) thresholds, the small group of 20 beside one of 80; the label-conditional form
    computes its group thresholds with the same function."""
    now = simulate_group_flag_coverage((20, 80), LEVEL, MISS, draws=1000, seed=0)
    plain = simulate_group_flag_coverage((20, 80), LEVEL, MISS, draws=1000, seed=0, rule=PLAIN_RANK_RULE)
    for group in now:
        assert group.coverage >= LEVEL - 2.5 * group.se, group
        assert group.mean_size < 20 - 5
    assert plain[0].coverage < LEVEL - 3 * plain[0].se, plain[0]


def test_recall_control_holds_given_the_flag() -> None:
    got = simulate_recall_given_flag(20, LEVEL, MISS, draws=1500, seed=0, n_gold=2)
    assert got.coverage >= LEVEL - 2.5 * got.se, got  # mean recall given the flag
    assert got.mean_size < 20 - 3


def test_bonferroni_answer_sets_cover_given_the_flag() -> None:
    """Both stages miss independently at alpha_stage / 2 = 0.05; the end-to-end target is 0.8."""
    now = simulate_answer_set_flag(40, 0.2, MISS, draws=4000, seed=0)
    plain = simulate_answer_set_flag(40, 0.2, MISS, draws=4000, seed=0, rule=PLAIN_RANK_RULE)
    assert now.coverage >= 0.8 - 2.5 * now.se, now
    assert plain.coverage < 0.8 - 3 * plain.se, plain
