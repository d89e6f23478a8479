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
    # 25 questions: CRC at the in-pool level (alpha - alpha/2) 0.9 needs n >= 22 for a finite threshold
    got = simulate_recall_given_flag(25, LEVEL, MISS, draws=1500, seed=0, n_gold=2)
    assert got.coverage >= LEVEL - 2.5 * got.se, got  # mean recall given the flag
    assert got.mean_size < 20 - 3


def test_bonferroni_answer_sets_cover_given_the_flag() -> None:
    """Both stages miss independently at alpha_stage / 2 = 0.05; the end-to-end target is 0.8."""
    now = simulate_answer_set_flag(40, 0.2, MISS, draws=4000, seed=0)
    plain = simulate_answer_set_flag(40, 0.2, MISS, draws=4000, seed=0, rule=PLAIN_RANK_RULE)
    assert now.coverage >= 0.8 - 2.5 * now.se, now
    assert plain.coverage < 0.8 - 3 * plain.se, plain


# --- issue 41, item 2: above the assumed miss rate, large calibrations withdraw the flag -----------------------


def test_pooled_flag_above_the_bound_matches_the_exact_figures() -> None:
    """n = 300 at pi = alpha: flagged in <= 5% of calibrations (exact 0.03); at pi = alpha/2 >= 85% stay flagged.
    The first pool-miss rule flags 40% of the pi = alpha calibrations (the negative control)."""
    from conformal_rag_plugins.core.quantile import POOL_MISS_1_RULE
    from conformal_rag_plugins.evaluation.flag_exact import split_given_flag

    above = simulate_flag_coverage(300, LEVEL, ALPHA, draws=300, seed=1)
    exact = split_given_flag(300, ALPHA, ALPHA)
    assert above.flag_rate <= 0.08 and abs(above.flag_rate - exact.flag_rate) < 0.04, (above, exact)
    at_bound = simulate_flag_coverage(300, LEVEL, MISS, draws=150, seed=1)
    assert at_bound.flag_rate >= 0.85 and at_bound.coverage >= LEVEL - 2.5 * at_bound.se, at_bound
    old = simulate_flag_coverage(300, LEVEL, ALPHA, draws=150, seed=1, rule=POOL_MISS_1_RULE)
    assert old.flag_rate > 0.3 and old.coverage < LEVEL - old.se, old  # exact: 0.884, flagged 40%


def test_a_group_that_misses_above_the_bound_loses_its_own_flag() -> None:
    """A group of 300 missing at alpha beside a clean one of 300: its flag comes up in <= 8% of calibrations (the
    first rule: 49%, covering 0.878); the clean group keeps its flag and its coverage."""
    from conformal_rag_plugins.core.quantile import POOL_MISS_1_RULE

    now = simulate_group_flag_coverage((300, 300), LEVEL, (ALPHA, 0.0), draws=150, seed=0)
    old = simulate_group_flag_coverage((300, 300), LEVEL, (ALPHA, 0.0), draws=150, seed=0, rule=POOL_MISS_1_RULE)
    assert now[0].flag_rate <= 0.08, now[0]
    assert old[0].flag_rate > 0.3 and old[0].coverage < LEVEL - 2 * old[0].se, old[0]
    assert now[1].flag_rate == 1.0 and now[1].coverage >= LEVEL - 2.5 * now[1].se, now[1]


@pytest.mark.parametrize("method", ["crc", "ltt"])
def test_recall_flag_above_the_bound_is_withdrawn_at_large_n(method: str) -> None:
    """Recall control at n = 300 with gold chunks missing at alpha: flagged in <= 10% of calibrations (the first
    rule: 59%, mean recall 0.85 given the flag); at the bound it stays flagged and holds."""
    from conformal_rag_plugins.core.quantile import POOL_MISS_1_RULE

    delta = 0.1 if method == "ltt" else None
    kw = {"n_gold": 2, "method": method, "delta": delta}
    above = simulate_recall_given_flag(300, LEVEL, ALPHA, draws=100, seed=0, **kw)  # type: ignore[arg-type]
    old = simulate_recall_given_flag(300, LEVEL, ALPHA, draws=100, seed=0, rule=POOL_MISS_1_RULE, **kw)  # type: ignore[arg-type]
    at_bound = simulate_recall_given_flag(300, LEVEL, MISS, draws=60, seed=0, **kw)  # type: ignore[arg-type]
    assert above.flag_rate <= 0.1, above
    assert old.flag_rate > 0.4 and old.coverage < LEVEL - 3 * old.se, old
    assert at_bound.flag_rate >= 0.85 and at_bound.coverage >= LEVEL - 2.5 * at_bound.se, at_bound
