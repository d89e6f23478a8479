"""The drift monitor's statistics and state: p-values, martingale, confidence sequence, ACI, JSON, errors, threads.

Synthetic data with fixed seeds; the real-data checks are in
``tests/monitor/test_monitor_real.py``.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/monitor/schema.py

from __future__ import annotations

import json
import math
import threading
from dataclasses import replace

import numpy as np
import pytest

from conformal_rag_plugins.core.binomial import binom_cdf
from conformal_rag_plugins.core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    FingerprintMismatchError,
)
from conformal_rag_plugins.core.martingale import OnlineConformalTest, SimpleJumper, smoothed_pvalue
from conformal_rag_plugins.core.online_coverage import (
    aci_next_alpha,
    aci_threshold,
    coverage_confidence_sequence,
)
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.monitor.monitor import ConformalMonitor, CoverageTracking
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")


def _binomial_limit(n: int, p: float, tail: float = 1e-3) -> int:
    """Smallest count c with P(Binomial(n, p) > c) <= tail."""
    return next(c for c in range(n + 1) if 1.0 - binom_cdf(c, n, p) <= tail)


@pytest.fixture
def cal() -> RetrievalCalibration:
    scores = tuple(float(s) for s in np.random.default_rng(0).uniform(0, 1, 99))
    return RetrievalCalibration(conformal_quantile(scores, 0.1), 0.1, "split", "relative", 10, 99, 0, scores, FP)


@pytest.fixture
def monitor(cal) -> ConformalMonitor:
    ref = np.random.default_rng(1).normal(0.7, 0.05, 200)
    return ConformalMonitor(cal, reference=ref, delta=0.05, seed=3)


# ---------------------------------------------------------------- p-values and martingale
def test_smoothed_pvalue_counts_the_query_in_the_ties() -> None:
    assert smoothed_pvalue([0.1, 0.2, 0.2, 0.3], 0.2, 0.5) == pytest.approx((1 + 0.5 * 3) / 5)
    assert smoothed_pvalue([], 0.2, 0.25) == 0.25
    assert smoothed_pvalue([0.1, 0.2], 9.0, 1.0) == pytest.approx(1 / 3)  # stranger than all: p <= 1/(n+1)


def test_growing_bag_pvalues_are_uniform_under_ties() -> None:
    """Heavy ties (integer statistics): the smoothed p-values stay U(0, 1) (moments and deciles)."""
    rng = np.random.default_rng(7)
    p = []
    for rep in range(40):
        test = OnlineConformalTest(rng.integers(0, 4, 30), delta=0.5, seed=rep)
        p += [test.update(float(v)) for v in rng.integers(0, 4, 100)]
    p = np.asarray(p)
    assert abs(p.mean() - 0.5) < 3 * math.sqrt(1 / 12 / p.size)
    counts = np.histogram(p, bins=10, range=(0, 1))[0]
    assert counts.min() > p.size / 10 - 4 * math.sqrt(p.size * 0.09), counts


def test_jumper_is_fair_on_uniform_pvalues_and_never_overflows() -> None:
    grid = (np.arange(20000) + 0.5) / 20000
    m = SimpleJumper()
    m.update(0.3)
    m.update(0.1)
    state, before = list(m._log_c), m.log_value
    vals = []  # E[M_{t+1} | past] = M_t: average the next value over a fine grid of p
    for p in grid:
        m._log_c, m.log_value = list(state), before
        vals.append(math.exp(m.update(float(p))))
    assert np.mean(vals) == pytest.approx(math.exp(before), rel=1e-6)
    long = SimpleJumper()
    for _ in range(5000):
        value = long.update(0.0)
    assert math.isfinite(value) and value > 700  # M_t > e^700: only the logarithm is representable


def test_ville_false_alarms_at_most_delta_on_exchangeable_streams() -> None:
    delta, runs = 0.1, 300
    rng = np.random.default_rng(11)
    alarms = 0
    for r in range(runs):
        data = rng.normal(size=400)
        test = OnlineConformalTest(data[:100], delta=delta, seed=r)
        for v in data[100:]:
            test.update(float(v))
        alarms += test.alarm_at is not None
    assert alarms <= _binomial_limit(runs, delta), alarms


def test_a_shift_raises_the_alarm() -> None:
    rng = np.random.default_rng(5)
    test = OnlineConformalTest(rng.normal(size=200), delta=0.01)
    for v in rng.normal(1.0, 1.0, 300):
        test.update(float(v))
    assert test.alarm_at is not None and test.alarm_at < 150
    assert test.log_path[test.alarm_at] >= math.log(100)


# ---------------------------------------------------------------- labels
def test_confidence_sequence_holds_at_all_times() -> None:
    """P(the true coverage ever leaves the interval over 500 labels) <= delta, with a binomial tolerance.

    Negative control: the pointwise Wald interval at the same level, looked at after every
    10 labels, leaves the true coverage in far more than delta of the runs.
    """
    delta, runs, c = 0.1, 200, 0.9
    z = 1.6448536269514722  # Phi^-1(1 - delta/2)
    rng = np.random.default_rng(2)
    misses, wald_misses = 0, 0
    for _ in range(runs):
        hits = np.cumsum(rng.random(500) < c)
        left, wald_left = False, False
        for t in range(9, 500, 10):
            lo, hi = coverage_confidence_sequence(int(hits[t]), t + 1, delta)
            left |= not (lo <= c <= hi)
            rate = hits[t] / (t + 1)
            wald_left |= abs(rate - c) > z * math.sqrt(rate * (1 - rate) / (t + 1))
        misses += left
        wald_misses += wald_left
    limit = _binomial_limit(runs, delta)
    assert misses <= limit < wald_misses, (misses, limit, wald_misses)
    lo, hi = coverage_confidence_sequence(900, 1000, 0.05)
    assert 0.85 < lo < 0.9 < hi < 0.94


def test_aci_keeps_long_run_misses_at_alpha_under_drift(cal) -> None:
    """Scores drift upward (worse retrieval): the fixed threshold under-covers, ACI keeps ~alpha."""
    rng = np.random.default_rng(3)
    alpha, gamma, n = 0.1, 0.01, 3000
    a, fixed_miss, aci_miss = alpha, 0, 0
    q_fixed = cal.threshold_
    for t in range(n):
        r = float(rng.uniform(0, 1) + 0.3 * t / n)
        miss = r > aci_threshold(cal.scores_, a)
        aci_miss += miss
        fixed_miss += r > q_fixed
        a = aci_next_alpha(a, alpha, gamma, miss)
    bound = (max(alpha, 1 - alpha) + gamma) / (gamma * n)
    assert abs(aci_miss / n - alpha) <= bound + 1e-12
    assert fixed_miss / n > alpha + 0.05  # the drift the monitor should see


def test_aci_threshold_edges() -> None:
    assert aci_threshold([0.1, 0.2], -0.01) == math.inf
    assert aci_threshold([0.1, 0.2], 1.0) == -math.inf
    assert aci_threshold(list(np.linspace(0, 1, 99)), 0.1) == conformal_quantile(list(np.linspace(0, 1, 99)), 0.1)


def test_monitor_labels_update_interval_and_aci(monitor, cal) -> None:
    for r in [0.05, 0.5, 2.0, math.inf]:
        monitor.observe_label(nonconformity=r)
    assert [c for c, _ in monitor.labels] == [True, True, False, False]
    assert monitor.aci_alpha == pytest.approx(0.1 + 0.005 * (4 * 0.1 - 2))
    lo, hi = monitor.coverage_interval()
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    monitor.observe_label(True)
    assert len(monitor.labels) == 5
    with pytest.raises(ConformalError, match="contradicts"):
        monitor.observe_label(True, nonconformity=5.0)
    with pytest.raises(ConformalError, match="NaN"):
        monitor.observe_label(nonconformity=float("nan"))


# ---------------------------------------------------------------- JSON
def test_json_round_trip_replays_and_continues(monitor, cal, tmp_path) -> None:
    rng = np.random.default_rng(4)
    for v in rng.normal(0.6, 0.05, 60):
        monitor.observe([float(v), float(v) - 0.1])
    monitor.observe_label(nonconformity=0.3)
    path = monitor.save(tmp_path / "monitor.json")
    again = ConformalMonitor.load(path, cal)
    assert again.to_dict() == monitor.to_dict()
    nxt = [0.55, 0.5]
    assert again.observe(nxt).p_value == monitor.observe(nxt).p_value
    assert again.alarm_at == monitor.alarm_at is not None  # a 0.1 drop in top-1 score is caught


def test_a_reloaded_calibration_is_the_same_calibration(monitor, cal, tmp_path) -> None:
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "cal.json"))
    monitor.observe([0.7], calibration=loaded)
    assert ConformalMonitor.load(monitor.save(tmp_path / "m.json"), loaded).n_stream == 1


def test_json_tampering_is_refused(monitor, cal, tmp_path) -> None:
    for v in (0.7, 0.72, 0.69):
        monitor.observe([v])
    data = monitor.to_dict()
    data["log_martingale"][1] += 1.0
    data = {k: v for k, v in data.items() if k != "checksum"}
    from conformal_rag_plugins.storage.jsonio import with_checksum

    path = tmp_path / "m.json"
    path.write_text(json.dumps(with_checksum(data)))
    with pytest.raises(CalibrationIntegrityError, match="replayed"):
        ConformalMonitor.load(path, cal)
    path.write_text(json.dumps({**monitor.to_dict(), "delta": 0.2}))
    with pytest.raises(CalibrationIntegrityError, match="checksum"):
        ConformalMonitor.load(path, cal)


def test_loading_for_another_calibration_is_refused(monitor, cal, tmp_path) -> None:
    path = monitor.save(tmp_path / "m.json")
    other = replace(cal, alpha_=0.2, threshold_=conformal_quantile(cal.scores_, 0.2))
    with pytest.raises(CalibrationError, match="another calibration"):
        ConformalMonitor.load(path, other)
    moved = replace(cal, fingerprint_=replace(FP, embedding_model="other"))
    with pytest.raises(FingerprintMismatchError, match="embedding_model"):
        ConformalMonitor.load(path, moved)


# ---------------------------------------------------------------- bad input
def test_observations_from_another_calibration_are_refused(monitor, cal) -> None:
    moved = replace(cal, fingerprint_=replace(FP, store="Chroma"))
    with pytest.raises(FingerprintMismatchError, match="store"):
        monitor.observe([0.7], calibration=moved)
    with pytest.raises(CalibrationError, match="another calibration"):
        monitor.observe([0.7], calibration=replace(cal, scores_=tuple(reversed(cal.scores_))))
    monitor.observe([0.7], calibration=replace(cal))  # an equal calibration (e.g. loaded from its file) is fine
    assert monitor.n_stream == 1


def test_nan_statistics_are_refused(monitor, cal) -> None:
    with pytest.raises(ConformalError, match="NaN"):
        monitor.observe_statistic(float("nan"))
    with pytest.raises(ConformalError, match="NaN"):
        monitor.observe([float("nan"), 0.2])
    with pytest.raises(ConformalError, match="NaN calibration statistic"):
        ConformalMonitor(cal, reference=[0.5, float("nan")])
    assert monitor.n_stream == 0


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5, float("nan"), "x"])
def test_delta_outside_the_unit_interval_is_refused(cal, delta) -> None:
    with pytest.raises(ConformalError, match="delta must"):
        ConformalMonitor(cal, reference=[0.5, 0.6], delta=delta)


def test_other_bad_settings(cal) -> None:
    with pytest.raises(ConformalError, match="Unknown drift statistic"):
        ConformalMonitor(cal, reference=[0.5], statistic="entropy")
    with pytest.raises(ConformalError, match="at least one"):
        ConformalMonitor(cal, reference=[])
    with pytest.raises(ConformalError, match="aci_gamma"):
        ConformalMonitor(cal, reference=[0.5], coverage=CoverageTracking(aci_gamma=0.0))


# ---------------------------------------------------------------- threads
def test_concurrent_updates_give_a_consistent_state(cal) -> None:
    """8 threads x 250 queries: every update counted once, and the state replays from its JSON."""
    mon = ConformalMonitor(cal, reference=np.linspace(0.5, 0.9, 100), delta=0.01)
    values = np.random.default_rng(9).uniform(0.5, 0.9, (8, 250))

    def work(row: np.ndarray) -> None:
        for v in row:
            mon.observe([float(v)], calibration=cal)
            mon.observe_label(bool(v > 0.55))

    threads = [threading.Thread(target=work, args=(row,)) for row in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mon.n_stream == len(mon.stream) == len(mon.p_values) == 2000 == len(mon.labels)
    assert sorted(mon.stream) == sorted(values.ravel().tolist())
    assert ConformalMonitor.from_dict(mon.to_dict(), cal).to_dict() == mon.to_dict()


def test_a_state_file_with_a_utf8_byte_order_mark_loads(monitor, cal, tmp_path) -> None:
    monitor.observe([0.7, 0.6])
    path = monitor.save(tmp_path / "monitor.json")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert ConformalMonitor.load(path, cal).to_dict() == monitor.to_dict()
