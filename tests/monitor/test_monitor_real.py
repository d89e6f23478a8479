"""The drift monitor on real retrieval statistics: at most delta false alarms, and an alarm under drift.

The statistic (top-1 host score of the LlamaIndex dense host over Chroma + MiniLM) is
computed once per bundled SQuAD question through the real host (the session's
``observations_factory``); the 200 random orders are then simulated in numpy with the
library's own :class:`~conformal_rag_plugins.core.martingale.OnlineConformalTest`.

Tolerance: the number of orders with an alarm is Binomial(200, p) with p <= delta under
exchangeability (Ville); the check fails when it exceeds the count c with
P(Binomial(200, delta) > c) <= 1e-3.

Negative controls, on the same data and orders:
- p-values against the fixed calibration bag only (the bag never grows): the p-values share
  the calibration bag, are dependent, and the martingale is no longer a test martingale;
- a per-query test (alarm at the first p-value <= delta): no correction for looking at
  every query.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

import numpy as np
import pytest

from conformal_rag_plugins.core.binomial import binom_cdf
from conformal_rag_plugins.core.martingale import OnlineConformalTest, SimpleJumper, tie_uniform

pytestmark = [pytest.mark.integration, pytest.mark.statistical]

ORDERS = 200
DELTA = 0.05
SEED = 1107
DROPIN_SEED = 20261122  # the drop-in tests' calibration split (tests/conftest.py)


def _limit(n: int, p: float, tail: float = 1e-3) -> int:
    return next(c for c in range(n + 1) if 1.0 - binom_cdf(c, n, p) <= tail)


@pytest.fixture(scope="module")
def strangeness(observations_factory) -> np.ndarray:
    """Minus the top-1 score of each of the 705 questions (larger = stranger)."""
    return np.array([-o.scores[0] for o in observations_factory("llamaindex", "dense")])


def _alarms(reference: np.ndarray, stream: np.ndarray, seed: int) -> bool:
    test = OnlineConformalTest(reference, delta=DELTA, seed=seed)
    for v in stream:
        test.update(float(v))
        if test.alarm_at is not None:
            return True
    return False


def _fixed_bag_alarms(reference: np.ndarray, stream: np.ndarray, seed: int) -> bool:
    """WRONG rule: smoothed p-values against the calibration bag only."""
    bag, m = sorted(reference.tolist()), SimpleJumper()
    for i, v in enumerate(stream):
        greater, equal = len(bag) - bisect_right(bag, v), bisect_right(bag, v) - bisect_left(bag, v)
        if m.update((greater + tie_uniform(seed, i) * (equal + 1)) / (len(bag) + 1)) >= math.log(1 / DELTA):
            return True
    return False


def _per_query_alarms(reference: np.ndarray, stream: np.ndarray, seed: int) -> bool:
    """WRONG rule: alarm at the first query whose own p-value is <= delta."""
    test = OnlineConformalTest(reference, delta=DELTA, seed=seed)
    return any(test.update(float(v)) <= DELTA for v in stream)


def _rate(rule, strangeness: np.ndarray, n_cal: int) -> int:
    """Orders (random split into calibration and stream, random stream order) with an alarm."""
    rng = np.random.default_rng(SEED)
    count = 0
    for r in range(ORDERS):
        perm = rng.permutation(strangeness.size)
        count += rule(strangeness[perm[:n_cal]], strangeness[perm[n_cal:]], r)
    return count


@pytest.mark.parametrize("n_cal", [50, 300])
def test_false_alarms_at_most_delta_on_random_orders(strangeness, n_cal) -> None:
    count = _rate(_alarms, strangeness, n_cal)
    assert count <= _limit(ORDERS, DELTA), (count, ORDERS)


def test_wrong_rules_fail_the_same_check(strangeness) -> None:
    limit = _limit(ORDERS, DELTA)
    fixed_bag = _rate(_fixed_bag_alarms, strangeness, 50)
    per_query = _rate(_per_query_alarms, strangeness, 50)
    assert fixed_bag > limit and per_query > limit, (fixed_bag, per_query, limit)


def test_held_out_orders_after_one_calibration(strangeness) -> None:
    """The issue's protocol: one calibration (the drop-in split, 300), 200 random orders of the 405 held out."""
    perm = np.random.default_rng(DROPIN_SEED).permutation(strangeness.size)
    cal, held = strangeness[perm[:300]], strangeness[perm[300:]]
    rng = np.random.default_rng(SEED)
    count = sum(_alarms(cal, held[rng.permutation(held.size)], r) for r in range(ORDERS))
    assert count <= _limit(ORDERS, DELTA), count


@pytest.fixture(scope="module")
def long_observations(chroma_memory_client):
    """The same 705 questions asked of the long-document index (chunked to 254 tokens) instead of the paragraphs."""
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
    from conformal_rag_plugins.commands.hosts import build_host
    from conformal_rag_plugins.local.long_documents import bundled_long_documents
    from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

    docs, questions = bundled_long_documents()
    chunked = chunk_corpus("llamaindex", docs, questions)
    host = build_host("llamaindex", "dense", chunked.chunks, client=chroma_memory_client)
    return collect_observations(chunked.questions, host.fetch, progress=False)


def test_questions_on_a_changed_corpus_raise_the_alarm(strangeness, long_observations) -> None:
    drifted = np.array([-o.scores[0] for o in long_observations])
    perm = np.random.default_rng(DROPIN_SEED).permutation(strangeness.size)
    cal = strangeness[perm[:300]]
    rng = np.random.default_rng(SEED)
    first = []
    for r in range(20):
        test = OnlineConformalTest(cal, delta=DELTA, seed=r)
        for v in drifted[rng.permutation(drifted.size)]:
            test.update(float(v))
            if test.alarm_at is not None:
                break
        first.append(test.alarm_at)
    assert all(a is not None for a in first), first
    assert np.median(first) < 200, first


def test_labels_on_the_changed_corpus_coverage_sequence_and_aci(observations_factory, long_observations) -> None:
    """Labels of the drifted stream: the fixed SQuAD threshold under-covers on long documents,
    the anytime interval excludes the target, and ACI brings the long-run miss rate back to alpha
    within its deterministic bound ``(max(alpha, 1 - alpha) + gamma) / (gamma T)``."""
    from conformal_rag_plugins.core.online_coverage import aci_miss
    from conformal_rag_plugins.monitor.monitor import ConformalMonitor, CoverageTracking
    from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
    from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

    obs = observations_factory("llamaindex", "dense")
    cal_obs = [obs[i] for i in np.random.default_rng(DROPIN_SEED).permutation(len(obs))[:300]]
    fp = Fingerprint("llamaindex", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "test")
    cal = (
        RetrievalConformalizer(0.9, score="relative")
        .conformalize_pools(cal_obs, fingerprint=fp, pool_size=50)
        .calibration_
    )
    gamma = 0.05
    monitor = ConformalMonitor.from_observations(cal, cal_obs, delta=DELTA, coverage=CoverageTracking(aci_gamma=gamma))
    aci_misses = 0
    for o in long_observations:
        r = o.score("relative")
        aci_misses += aci_miss(r, monitor.aci_threshold())  # a gold chunk outside the pool misses at +inf too
        monitor.observe(o.scores)
        monitor.observe_label(nonconformity=r)
    n = len(long_observations)
    fixed_miss = 1 - sum(c for c, _ in monitor.labels) / n
    lo, hi = monitor.coverage_interval()
    assert monitor.alarm
    assert fixed_miss > 0.1 and hi < 0.9, (fixed_miss, lo, hi)
    assert monitor.aci_miss_rate == aci_misses / n
    assert abs(aci_misses / n - 0.1) <= (0.9 + gamma) / (gamma * n), aci_misses / n
