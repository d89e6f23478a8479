"""Issue 21: the drift monitor compares like with like, and its alarms cannot be reset.

* Groups: with a per-group calibration the retrievers serve each query its group's threshold,
  so a ``set_size`` reference taken at the pooled threshold is another statistic. Seeded
  simulation (two groups, 400 calibration questions, 1,000 stream queries from the same
  population, delta = 0.05): the monitor built by ``from_observations`` keeps false alarms
  within a binomial limit at delta, while the old mixed rule (pooled reference, group stream)
  alarms far above it (the negative control).
* Labels are judged against the threshold served for the query's group.
* Parents: a parent-level calibration refuses a reference of plain (chunk) score lists.
* State: signed with the calibrations' key; a stream cut before its alarm, another delta or an
  erased alarm is refused; restarts spend delta / 2**k; the seed is fixed at creation.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/monitor/schema.py

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.binomial import binom_cdf
from conformal_rag_plugins.core.errors import CalibrationIntegrityError, ConformalError
from conformal_rag_plugins.core.martingale import restart_delta, smoothed_pvalue, strangeness, tie_uniform
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.retrieval_scores import keep_mask
from conformal_rag_plugins.monitor.monitor import (
    MONITOR_SCHEMA_VERSION,
    ConformalMonitor,
    ServedScores,
    monitor_statistic,
    served_threshold,
)
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
POOL, DELTA, N_CAL, N_STREAM, RUNS = 20, 0.05, 400, 1000, 60
KEY = "test-signing-key"


def _binomial_limit(n: int, p: float, tail: float = 1e-3) -> int:
    """Smallest count c with P(Binomial(n, p) > c) <= tail."""
    return next(c for c in range(n + 1) if 1.0 - binom_cdf(c, n, p) <= tail)


def _question(rng: np.random.Generator, i: int) -> tuple[PoolObservation, str]:
    """Group a: close scores, gold near the top; group b: spread scores, gold deeper. Same mix everywhere."""
    group = "a" if rng.random() < 0.5 else "b"
    scores = 0.9 - np.cumsum(rng.exponential(0.01 if group == "a" else 0.04, POOL))
    gold = int(min(rng.geometric(0.3 if group == "a" else 0.15) - 1, POOL - 1))
    return PoolObservation(scores, (gold,), question_id=f"q{i}"), group


def _grouped(rng: np.random.Generator, n: int = N_CAL) -> tuple[RetrievalCalibration, list[PoolObservation]]:
    questions = [_question(rng, i) for i in range(n)]
    obs = [o for o, _ in questions]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = (
            RetrievalConformalizer(0.9, score="relative")
            .conformalize_pools(obs, fingerprint=FP, pool_size=POOL, groups=[g for _, g in questions], group_by="g")
            .calibration_
        )
    return cal, obs


def _false_alarm(seed: int, mixed: bool) -> bool:
    rng = np.random.default_rng(seed)
    cal, obs = _grouped(rng)
    if mixed:  # the old rule: reference at the pooled threshold, stream at the query's group threshold
        ref = [int(keep_mask("relative", o.scores, cal.threshold_).sum()) for o in obs]
        monitor = ConformalMonitor(cal, reference=ref, statistic="set_size", delta=DELTA, seed=seed)
    else:
        monitor = ConformalMonitor.from_observations(cal, obs, statistic="set_size", delta=DELTA, seed=seed)
    for j in range(N_STREAM):
        o, group = _question(rng, N_CAL + j)
        size = int(keep_mask("relative", o.scores, cal.threshold_for(group)[0]).sum())  # what the retriever serves
        monitor.observe(o.scores, set_size=size, group=group, calibration=cal)
        if monitor.alarm:
            return True
    return False


# ---------------------------------------------------------------- groups
def test_grouped_set_size_false_alarms_stay_within_delta_and_the_mixed_rule_fails() -> None:
    limit = _binomial_limit(RUNS, DELTA)
    fixed = sum(_false_alarm(seed, mixed=False) for seed in range(RUNS))
    mixed = sum(_false_alarm(seed, mixed=True) for seed in range(RUNS // 3))
    assert fixed <= limit, (fixed, limit)
    assert mixed / (RUNS // 3) > 0.5, mixed  # the negative control: the group thresholds' sizes are another statistic


def test_reference_and_stream_use_the_group_threshold() -> None:
    cal, obs = _grouped(np.random.default_rng(5), 200)
    monitor = ConformalMonitor.from_observations(cal, obs, statistic="set_size")
    group_of = dict(zip(cal.question_ids_, cal.group_labels_, strict=True))
    assert cal.threshold_for("a")[0] != cal.threshold_for("b")[0] != cal.threshold_
    want = [int(keep_mask("relative", o.scores, cal.threshold_for(group_of[o.question_id])[0]).sum()) for o in obs]
    assert monitor.reference == want
    assert monitor_statistic("set_size", obs[0].scores, cal, "b") == float(
        keep_mask("relative", obs[0].scores, cal.threshold_for("b")[0]).sum()
    )
    with pytest.raises(ConformalError, match="without the query's group"):
        monitor.observe(obs[0].scores)  # a pooled-threshold query against a per-group reference
    with pytest.raises(ConformalError, match="not the"):
        monitor.observe(obs[0].scores, group="a", set_size=POOL + 1)
    pooled = ConformalMonitor.from_observations(cal, obs, statistic="set_size", groups=None)
    assert pooled.reference == [int(keep_mask("relative", o.scores, cal.threshold_).sum()) for o in obs]
    with pytest.raises(ConformalError, match="pooled threshold"):
        pooled.observe(obs[0].scores, group="a")
    with pytest.raises(ConformalError, match="group of every question"):
        ConformalMonitor.from_observations(cal, [o.scores for o in obs], statistic="set_size")
    served = [ServedScores(tuple(o.scores), "chunk", group_of[o.question_id]) for o in obs]
    assert ConformalMonitor.from_observations(cal, served, statistic="set_size").reference == want


def test_observe_label_judges_the_hit_against_the_group_threshold() -> None:
    cal, _ = _grouped(np.random.default_rng(6), 200)
    lo, hi = sorted((cal.threshold_for("a")[0], cal.threshold_for("b")[0]))
    loose = "a" if cal.threshold_for("a")[0] == hi else "b"
    tight = "b" if loose == "a" else "a"
    r = (lo + hi) / 2  # inside the loose group's set, outside the tight group's
    monitor = ConformalMonitor(cal, reference=[0.5, 0.6, 0.7], delta=DELTA)
    monitor.observe_label(nonconformity=r, group=loose)
    monitor.observe_label(nonconformity=r, group=tight)
    assert [c for c, _ in monitor.labels] == [True, False]
    assert served_threshold(cal, loose) == hi
    with pytest.raises(ConformalError, match="without the query's group"):
        monitor.observe_label(nonconformity=r)
    with pytest.raises(ConformalError, match="contradicts"):
        monitor.observe_label(True, nonconformity=r, group=tight)
    again = ConformalMonitor.from_dict(monitor.to_dict(), cal)
    assert again.labels == monitor.labels and again.label_groups == [loose, tight]
    data = monitor.to_dict()
    data["labels"][1]["covered"] = True  # a miss at the group's threshold rewritten as a hit
    with pytest.raises(CalibrationIntegrityError, match="Label 1"):
        ConformalMonitor.from_dict(with_checksum({k: v for k, v in data.items() if k != "checksum"}), cal)


# ---------------------------------------------------------------- parents
def test_a_parent_level_calibration_refuses_a_chunk_reference() -> None:
    scores = tuple(float(s) for s in np.random.default_rng(0).uniform(0, 1, 99))
    fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine", retriever="dense>parent:max")
    cal = RetrievalCalibration(conformal_quantile(scores, 0.1), 0.1, "split", "relative", 10, 99, 0, scores, fp)
    pools = [[0.9, 0.8, 0.5], [0.7, 0.6]]
    with pytest.raises(ConformalError, match=r"parent-level \(parent:max\).*pool_scores"):
        ConformalMonitor.from_observations(cal, pools, statistic="set_size")
    with pytest.raises(ConformalError, match="parent-level"):
        ConformalMonitor.from_observations(cal, [ServedScores((0.9, 0.8), "chunk")], statistic="set_size")
    with pytest.raises(ConformalError, match="parent-level"):
        ConformalMonitor.from_observations(cal, pools, unit="parent:sum")
    served = [ServedScores(tuple(p), "parent:max") for p in pools]
    assert ConformalMonitor.from_observations(cal, served, statistic="set_size").reference == [
        monitor_statistic("set_size", p, cal, None) for p in pools
    ]
    assert ConformalMonitor.from_observations(cal, pools, unit="parent:max").reference == [0.9, 0.7]
    chunk_cal = RetrievalCalibration(cal.threshold_, 0.1, "split", "relative", 10, 99, 0, scores, FP)
    with pytest.raises(ConformalError, match="chunk-level"):
        ConformalMonitor.from_observations(chunk_cal, served)


# ---------------------------------------------------------------- signed state, restarts, seed
def _alarmed(seed: int = 3) -> tuple[RetrievalCalibration, ConformalMonitor]:
    scores = tuple(float(s) for s in np.random.default_rng(0).uniform(0, 1, 99))
    cal = RetrievalCalibration(conformal_quantile(scores, 0.1), 0.1, "split", "relative", 10, 99, 0, scores, FP)
    rng = np.random.default_rng(seed)
    monitor = ConformalMonitor(cal, reference=rng.normal(0.7, 0.05, 200), delta=DELTA, seed=seed)
    for v in rng.normal(0.6, 0.05, 150):  # a 0.1 drop of the top-1 score: the alarm fires
        monitor.observe([float(v)])
    assert monitor.alarm
    return cal, monitor


def _rechecksum(data: dict) -> dict:
    return with_checksum({k: v for k, v in data.items() if k != "checksum"})


def _cut_before_alarm(data: dict) -> dict:
    cut = data["alarm_at"]
    out = {**data, "alarm_at": None}
    for key in ("stream", "p_values", "log_martingale"):
        out[key] = data[key][:cut]
    out["runs"] = [{**data["runs"][0], "alarm_at": None}]
    return _rechecksum(out)


def _erase_with_tiny_delta(data: dict) -> dict:
    tiny = min(1e-12, math.exp(-max(data["log_martingale"]) - 1.0))  # an alarm level the martingale never reached
    return _rechecksum(
        {**data, "delta": tiny, "alarm_at": None, "runs": [{**data["runs"][0], "delta": tiny, "alarm_at": None}]}
    )


@pytest.mark.parametrize("tamper", [_cut_before_alarm, _erase_with_tiny_delta])
def test_a_signed_state_whose_alarm_was_erased_is_refused(tamper, tmp_path, monkeypatch) -> None:
    cal, monitor = _alarmed()
    signed = monitor.to_dict(signing_key=KEY)
    assert ConformalMonitor.from_dict(signed, cal, signing_key=KEY).alarm_at == monitor.alarm_at
    edited = tamper(signed)
    assert ConformalMonitor.from_dict(edited, cal).alarm_at is None  # unsigned: self-consistent, nothing proves more
    with pytest.raises(CalibrationIntegrityError, match="signature does not match"):
        ConformalMonitor.from_dict(edited, cal, signing_key=KEY)
    monkeypatch.setenv("CONFORMAL_RAG_SIGNING_KEY", KEY)  # the calibrations' key signs and checks monitors too
    path = monitor.save(tmp_path / "m.json")
    assert "signature" in json.loads(path.read_text())
    assert ConformalMonitor.load(path, cal).alarm_at == monitor.alarm_at
    path.write_text(json.dumps(tamper(json.loads(path.read_text()))))
    with pytest.raises(CalibrationIntegrityError, match="signature does not match"):
        ConformalMonitor.load(path, cal)
    path.write_text(json.dumps(monitor.to_dict()))  # unsigned
    with pytest.raises(CalibrationIntegrityError, match="not signed"):
        ConformalMonitor.load(path, cal)


def test_an_erased_alarm_is_refused_by_the_replay_even_unsigned() -> None:
    cal, monitor = _alarmed()
    data = monitor.to_dict()
    erased = _rechecksum({**data, "alarm_at": None, "runs": [{**data["runs"][0], "alarm_at": None}]})
    with pytest.raises(CalibrationIntegrityError, match="alarm_at"):
        ConformalMonitor.from_dict(erased, cal)


def test_restarts_spend_delta_over_halves() -> None:
    cal, monitor = _alarmed()
    rng = np.random.default_rng(11)
    with pytest.raises(ConformalError, match="not raised an alarm"):
        ConformalMonitor(cal, reference=[0.5, 0.6], delta=DELTA).restart()
    for k in range(1, 4):
        monitor.restart()
        assert not monitor.alarm and monitor.restarts == k
        assert monitor.delta == DELTA / 2**k == restart_delta(DELTA, k)
        assert monitor.threshold == pytest.approx(2**k / DELTA)
        first = monitor.n_stream
        while not monitor.alarm:
            monitor.observe([float(rng.normal(0.45, 0.05))])
        assert monitor.alarm_at >= first
    runs = monitor.runs
    assert [r["delta"] for r in runs] == [DELTA / 2**k for k in range(4)]
    assert sum(r["delta"] for r in runs[1:]) < DELTA  # all restarted runs together: below delta, not k * delta
    assert sum(restart_delta(DELTA, k) for k in range(1, 200)) <= DELTA
    assert len(monitor.alarms) == 4 and monitor.alarms == sorted(monitor.alarms)
    again = ConformalMonitor.from_dict(monitor.to_dict(), cal)
    assert again.to_dict() == monitor.to_dict() and again.restarts == 3
    data = monitor.to_dict()
    data["runs"][2]["delta"] = DELTA  # a restart at the full delta
    with pytest.raises(CalibrationIntegrityError, match="Run 2 records delta"):
        ConformalMonitor.from_dict(_rechecksum(data), cal)
    data = monitor.to_dict()
    data["runs"][1]["start"] = data["runs"][0]["alarm_at"]  # a restart before the alarm that allows it
    with pytest.raises(CalibrationIntegrityError):
        ConformalMonitor.from_dict(_rechecksum(data), cal)


def test_the_seed_is_fixed_at_creation_and_a_restart_continues_its_uniforms() -> None:
    cal, monitor = _alarmed(seed=7)
    monitor.restart()
    start = monitor.n_stream
    value = 0.66
    p = monitor.observe([value]).p_value
    # a new run continues the bag: the reference and every pre-restart query (issue 41)
    bag = sorted(strangeness("top1", v) for v in [*monitor.reference, *monitor.stream[:start]])
    assert p == smoothed_pvalue(bag, strangeness("top1", value), tie_uniform(7, start))
    assert p != smoothed_pvalue(bag, strangeness("top1", value), tie_uniform(7, 0))
    again = ConformalMonitor.from_dict(monitor.to_dict(), cal)
    assert again.seed == 7 and again.p_values == monitor.p_values and again.log_martingale == monitor.log_martingale
    assert again.observe([0.61]).p_value == monitor.observe([0.61]).p_value
    reseeded = _rechecksum({**monitor.to_dict(), "seed": 8})
    with pytest.raises(CalibrationIntegrityError, match="p-values"):
        ConformalMonitor.from_dict(reseeded, cal)
    with pytest.raises(CalibrationIntegrityError, match="signature"):
        ConformalMonitor.from_dict(_rechecksum({**monitor.to_dict(signing_key=KEY), "seed": 8}), cal, signing_key=KEY)


def test_a_schema_1_state_loads_with_a_warning_and_is_refused_with_a_key() -> None:
    cal, monitor = _alarmed()
    monitor.observe_label(nonconformity=0.1)
    data = monitor.to_dict()
    old = {k: v for k, v in data.items() if k not in ("runs", "grouped", "checksum", "score_source")}
    old["schema_version"] = 1
    old["labels"] = [{k: v for k, v in lab.items() if k != "group"} for lab in data["labels"]]
    old = with_checksum(old)
    with pytest.warns(UserWarning, match="before schema 2"):
        again = ConformalMonitor.from_dict(old, cal)
    assert again.alarm_at == monitor.alarm_at and again.p_values == monitor.p_values
    assert again.to_dict()["schema_version"] == MONITOR_SCHEMA_VERSION
    with pytest.raises(CalibrationIntegrityError, match="not signed"):
        ConformalMonitor.from_dict(old, cal, signing_key=KEY)
    assert math.isfinite(again.delta)
