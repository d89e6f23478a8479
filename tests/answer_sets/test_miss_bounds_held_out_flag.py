"""Issue 41, section 4: a generator bound chosen on held-out questions covers given the flag; chosen otherwise, not.

Synthetic generator scores (seeded): a question has no correct sampled answer (``+inf``) with
probability ``pi = 0.63``, else ``-confidence`` uniform. The generator stage is calibrated on ``n = 40``
questions at ``alpha_gen = 0.7`` through the end-to-end rule (``bonferroni_thresholds`` with
``miss_bounds``), and the test question is covered when its score is at most the threshold.

* held out: the bound is the 95% Clopper-Pearson upper bound of the misses of 400 *other* questions
  (``held_out_bound``), so it is independent of the calibration and above ``pi`` in >= 95% of draws;
* negative controls: the bound read off the calibration questions themselves (``m / n``), and the bound
  ignored (the plain rank, ``miss_bound=0``), both of which flag more often and cover less.

Each simulated rate is also computed exactly (binomial sums over the miss count, with the ranks of
``flagged_rank``), and the simulation must agree with it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.miss_bounds import held_out_bound
from conformal_rag_plugins.core.binomial import binom_pmf_all
from conformal_rag_plugins.core.combination import bonferroni_thresholds
from conformal_rag_plugins.core.errors import InfiniteThresholdWarning
from conformal_rag_plugins.core.quantile import flagged_rank

pytestmark = pytest.mark.statistical

N, N_HELD_OUT, PI = 40, 400, 0.63
ALPHA, ALPHA_RET = 0.75, 0.05  # alpha_gen = 0.7: target P(covered | flag) >= 0.3
ALPHA_GEN = ALPHA - ALPHA_RET
TRIALS = 40_000
RET = np.ones(N)  # the retrieval stage never misses here: only the generator stage is measured


def _simulate(rule: str, seed: int = 41) -> tuple[float, float, int]:
    """``(flag rate, coverage given the flag, flags)`` of the generator stage under ``rule``."""
    rng = np.random.default_rng(seed)
    held_out = {m: held_out_bound(m, N_HELD_OUT, 0.95) for m in range(N_HELD_OUT + 1)}
    flags = covered = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for _ in range(TRIALS):
            miss = rng.random(N) < PI
            gen = np.where(miss, math.inf, -rng.random(N))
            test = math.inf if rng.random() < PI else -rng.random()
            if rule == "held-out":
                bound = held_out[int((rng.random(N_HELD_OUT) < PI).sum())]
            elif rule == "calibration":
                bound = float(miss.mean())
            else:
                bound = 0.0
            if bound >= ALPHA_GEN:
                continue  # no split can hold this bound: no flag
            q_gen = bonferroni_thresholds(RET, gen, ALPHA, alpha_ret=ALPHA_RET, miss_bounds=(0.0, bound)).q_gen
            if math.isfinite(q_gen):
                flags += 1
                covered += test <= q_gen
    return flags / TRIALS, covered / max(1, flags), flags


def _exact(bound_of: Callable[[int], float], weights: dict[float, float] | None = None) -> tuple[float, float]:
    """Exact ``(P(flag), P(covered | flag))``: given ``m`` misses the threshold is the ``k``-th of ``n - m``
    uniform hit scores, so a hit test is covered with probability ``k / (n - m + 1)``."""
    pmf = binom_pmf_all(N, PI)
    flag = cov = 0.0
    for bound, w in (weights or {None: 1.0}).items():
        for m in range(N + 1):
            b = bound_of(m) if bound is None else bound
            rank = flagged_rank(N, ALPHA_GEN, b) if b < ALPHA_GEN else None
            if rank is None or m > rank.max_misses:
                continue
            flag += w * pmf[m]
            cov += w * pmf[m] * (1 - PI) * rank.rank / (N - m + 1)
    return flag, cov / flag


def _held_out_weights() -> dict[float, float]:
    pmf = binom_pmf_all(N_HELD_OUT, PI)
    return {held_out_bound(m, N_HELD_OUT, 0.95): float(pmf[m]) for m in range(N_HELD_OUT + 1) if pmf[m] > 1e-12}


def test_a_held_out_generator_bound_covers_given_the_flag() -> None:
    rate, coverage, flags = _simulate("held-out")
    exact_rate, exact_coverage = _exact(lambda m: 0.0, _held_out_weights())
    se = math.sqrt(0.3 * 0.7 / flags)
    assert flags > 5_000 and rate == pytest.approx(exact_rate, abs=0.01)  # flagged in about 20% of calibrations
    assert abs(coverage - exact_coverage) < 4 * se
    assert exact_coverage >= 1 - ALPHA_GEN and coverage >= 1 - ALPHA_GEN  # exact 0.316, simulated likewise


@pytest.mark.parametrize("rule", ["calibration", "ignored"])
def test_a_bound_from_the_calibration_or_none_under_covers_given_the_flag(rule: str) -> None:
    rate, coverage, flags = _simulate(rule)
    exact_rate, exact_coverage = _exact(lambda m: m / N if rule == "calibration" else 0.0)
    se = math.sqrt(0.3 * 0.7 / flags)
    assert rate == pytest.approx(exact_rate, abs=0.01) and abs(coverage - exact_coverage) < 4 * se
    assert exact_coverage < 0.29 and coverage < 1 - ALPHA_GEN - 3 * se  # exact 0.279 / 0.288: the flag over-claims
