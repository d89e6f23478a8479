"""Issue 41, items 2 and 3: what the guaranteed flag promises at every pool-miss rate, computed exactly.

The exact figures of :mod:`conformal_rag_plugins.evaluation.flag_exact` (continuous scores, questions missing
the pool independently at ``pi``) for the current rule, each with the first pool-miss rule (``pool-miss-1``:
one rank for every miss count, a miss cap at the 0.999 quantile) as the negative control. The simulations
through the library that these numbers must match are in ``tests/evaluation/test_flag_trials.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformal_rag_plugins.core.quantile import (
    PLAIN_RANK_RULE,
    POOL_MISS_1_RULE,
    conformal_rank,
    flagged_rank,
    threshold_rule,
)
from conformal_rag_plugins.evaluation.flag_exact import pac_given_flag, split_given_flag
from conformal_rag_plugins.evaluation.flag_trials import simulate_flag_coverage

ALPHA = 0.1


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
@pytest.mark.parametrize("share", [None, 0.2, 0.8])
def test_split_covers_given_the_flag_for_every_miss_rate_up_to_the_bound(alpha: float, share: float | None) -> None:
    """The schedule (plain rank without misses, a larger one with) holds on a fine grid up to the bound, at every
    size from the first flagged one: the exact check of the theorem's monotone argument."""
    bound = None if share is None else alpha * share
    b = alpha / 2 if bound is None else bound
    checked = 0
    for n in [*range(5, 120), 150, 300, 1000, 3000]:
        if flagged_rank(n, alpha, bound) is None:
            continue
        for pi in np.linspace(0, b, 21):
            got = split_given_flag(n, alpha, float(pi), miss_bound=bound)
            assert got.given_flag >= 1 - alpha - 1e-12, (n, pi, got)
        checked += 1
    assert checked > 20
    with threshold_rule(PLAIN_RANK_RULE):  # negative control: the plain rank for every miss count falls below
        assert split_given_flag(20, ALPHA, ALPHA / 2).given_flag < 1 - ALPHA


def test_above_the_bound_large_calibrations_withdraw_the_flag() -> None:
    """At n = 300 and pi = alpha a flagged set must cover >= 0.9 or the flag come up in <= 5% of calibrations;
    at the bound (pi = alpha/2) >= 85% stay flagged; n = 50 at pi = alpha does not get worse (>= 0.865)."""
    at_alpha = split_given_flag(300, ALPHA, ALPHA)
    assert at_alpha.given_flag >= 0.9 or at_alpha.flag_rate <= 0.05, at_alpha
    assert split_given_flag(300, ALPHA, ALPHA / 2).flag_rate >= 0.85
    assert split_given_flag(50, ALPHA, ALPHA).given_flag >= 0.865
    assert split_given_flag(1000, ALPHA, 0.75 * ALPHA).flag_rate <= 0.05
    with threshold_rule(POOL_MISS_1_RULE):  # negative control: the 0.883, flagged 38%
        old = split_given_flag(300, ALPHA, ALPHA)
        assert old.given_flag < 0.885 and old.flag_rate > 0.35


def test_without_misses_the_threshold_is_the_plain_rank() -> None:
    """Pay only for what happened: a calibration without misses uses ceil((n+1)(1-alpha)) from n = 40 on
    (alpha = 0.1); the first pool-miss rule used a larger rank whatever happened (n = 40: 38 against 37)."""
    for n in [40, 41, 50, 77, 100, 300, 1000, 10_000]:
        rank = flagged_rank(n, ALPHA)
        assert rank is not None and rank.rank_for(0) == conformal_rank(n, ALPHA), n
    with threshold_rule(POOL_MISS_1_RULE):
        assert flagged_rank(40, ALPHA).rank_for(0) == 38  # type: ignore[union-attr]
    assert flagged_rank(40, ALPHA).rank_for(1) == 38  # type: ignore[union-attr]


def test_mean_set_size_at_n_40_without_misses_is_the_plain_ranks() -> None:
    """Seeded pools of 20 that never miss, 300 calibrations of n = 40: mean set size against the plain rank's.
    The aim is <= 1.05x; the first pool-miss rule pays 1.14x in the issue (the negative control)."""
    plain = simulate_flag_coverage(40, 1 - ALPHA, 0.0, draws=300, seed=4, rule=PLAIN_RANK_RULE)
    now = simulate_flag_coverage(40, 1 - ALPHA, 0.0, draws=300, seed=4)
    old = simulate_flag_coverage(40, 1 - ALPHA, 0.0, draws=300, seed=4, rule=POOL_MISS_1_RULE)
    assert now.mean_size <= 1.05 * plain.mean_size, (now, plain)
    assert old.mean_size > 1.05 * plain.mean_size, (old, plain)
    assert now.flag_rate == 1.0 and now.mean_size < 20 - 5  # flagged, and not keep-everything


@pytest.mark.parametrize("n", [50, 100, 300, 1000])
def test_pac_holds_given_the_flag_up_to_the_bound(n: int) -> None:
    for pi in (0.0, ALPHA / 4, ALPHA / 2):
        got = pac_given_flag(n, ALPHA, 0.1, pi)
        assert got.given_flag <= 0.1 + 1e-12, (n, pi, got)


def test_pac_above_the_bound_large_calibrations_withdraw_the_flag() -> None:
    """At pi = 3 epsilon / 4 the PAC claim fails given the flag (0.997 at n = 1000 in the issue): large
    calibrations now withdraw it (<= 5% flagged), where the first rule kept it in 44% of calibrations."""
    now = pac_given_flag(1000, ALPHA, 0.1, 0.75 * ALPHA)
    assert now.given_flag <= 0.1 or now.flag_rate <= 0.05, now
    assert pac_given_flag(300, ALPHA, 0.1, ALPHA).flag_rate <= 0.05
    with threshold_rule(POOL_MISS_1_RULE):
        old = pac_given_flag(1000, ALPHA, 0.1, 0.75 * ALPHA)
        assert old.given_flag > 0.9 and old.flag_rate > 0.4
