"""Issue 41 item 5: a restart tests at its stated level ``delta / 2**k`` given the alarm that caused it.

Restarts used to begin from the first reference alone. After a *false* alarm that reference is atypical
(the alarm says so), and the restarted run false-alarmed at 0.159 +- 0.022 where its level was 0.05. A
restart now continues the bag (the reference plus every earlier query: under no drift the p-values after
the alarm are fresh uniforms, independent of it) or takes a fresh reference drawn after the alarm. The
seeded simulations (synthetic statistics, no model) count the restarted runs' false alarms given a first
false alarm; the old rule, replayed with the core test on the same draws, is the negative control.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/monitor/schema.py

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationIntegrityError, ConformalError
from conformal_rag_plugins.core.martingale import OnlineConformalTest, smoothed_pvalue, strangeness, tie_uniform
from conformal_rag_plugins.monitor.monitor import RUN_REFERENCES, ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
SCORES = tuple(i / 20 for i in range(1, 20))
CAL = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, len(SCORES), 0, SCORES, FP)
#: The restarts simulated (the fresh one needs ``restart(reference=...)``, new in issue 41).
HOWS = ("continued", "fresh")
#: The first run's level; the restart tests at half of it.
DELTA = 0.2
#: Reference size, first-run and restarted-run lengths, trials: about 160 first-run false alarms.
N_REFERENCE, FIRST, SECOND, TRIALS = 10, 60, 200, 2500


def _bound(level: float, n: int) -> float:
    """The most false alarms allowed in ``n`` restarted runs at ``level``: three binomial standard errors above."""
    return n * level + 3.0 * math.sqrt(n * level * (1.0 - level))


@functools.cache
def _restarted_false_alarms(seed: int = 20261129) -> dict[str, int]:
    """No drift anywhere: how many first runs false-alarm, and how many restarted runs alarm again after them.

    The first run is simulated with the core test (the monitor's first run is exactly that test); each
    trial that alarms is then run through :class:`ConformalMonitor` up to its alarm and restarted both
    ways (``continued``; ``fresh``: a fresh reference of the same size, drawn after the alarm), beside the
    old rule (``initial``: a new martingale against the first reference alone) on the same queries.
    """
    rng = np.random.default_rng(seed)
    counts = {"first": 0, "continued": 0, "fresh": 0, "initial": 0}
    for trial in range(TRIALS):
        reference, stream = rng.normal(size=N_REFERENCE), rng.normal(size=FIRST + SECOND)
        new_reference = rng.normal(size=N_REFERENCE).tolist()
        bag = [strangeness("top1", v) for v in reference]
        first = OnlineConformalTest(bag, delta=DELTA, seed=trial)
        for v in stream[:FIRST]:
            first.update(strangeness("top1", float(v)))
            if first.alarm_at is not None:
                break
        if first.alarm_at is None:
            continue
        counts["first"] += 1
        start = first.alarm_at + 1
        after = [float(v) for v in stream[start : start + SECOND]]
        for how in HOWS:
            mon = ConformalMonitor(CAL, reference=reference.tolist(), statistic="top1", delta=DELTA, seed=trial)
            for v in stream[:start]:
                mon.observe_statistic(float(v))
            assert mon.alarm_at == first.alarm_at  # the monitor's first run is the core test
            if how == "fresh":
                mon.restart(reference=new_reference)
            else:
                mon.restart()
            assert mon.delta == DELTA / 2
            counts[how] += any(mon.observe_statistic(v).alarm for v in after)
        old = OnlineConformalTest(bag, delta=DELTA / 2, seed=trial, first_step=start)
        for v in after:
            old.update(strangeness("top1", v))
            if old.alarm_at is not None:
                break
        counts["initial"] += old.alarm_at is not None
    return counts


def test_a_continued_restart_after_a_false_alarm_keeps_its_level_and_the_old_rule_does_not() -> None:
    counts = _restarted_false_alarms()
    n = counts["first"]
    assert n >= 100  # enough restarts to tell 0.1 from 0.25
    assert n <= _bound(DELTA, TRIALS)  # the first run keeps its own level
    assert counts["continued"] <= _bound(DELTA / 2, n), counts
    assert counts["initial"] > _bound(DELTA / 2, n), counts  # negative control: the old rule


def test_a_fresh_reference_restart_after_a_false_alarm_keeps_its_level() -> None:
    counts = _restarted_false_alarms()
    assert counts["fresh"] <= _bound(DELTA / 2, counts["first"]), counts


# ---------------------------------------------------------------- what a restart's bag is, saved and replayed
def _alarmed(seed: int = 5) -> ConformalMonitor:
    rng = np.random.default_rng(seed)
    mon = ConformalMonitor(CAL, reference=rng.normal(0.7, 0.05, 60).tolist(), delta=0.05, seed=seed)
    for v in rng.normal(0.5, 0.05, 80):  # a drop of the top-1 score: the alarm fires
        mon.observe_statistic(float(v))
    assert mon.alarm
    return mon


def test_a_continued_restart_bets_against_the_reference_and_every_earlier_query() -> None:
    mon = _alarmed()
    start, value = mon.n_stream, 0.66
    mon.restart()
    p = mon.observe_statistic(value).p_value
    bag = sorted(strangeness("top1", v) for v in [*mon.reference, *mon.stream[:start]])
    assert p == smoothed_pvalue(bag, strangeness("top1", value), tie_uniform(5, start))
    old_bag = sorted(strangeness("top1", v) for v in mon.reference)  # the old rule's bag gives another p-value
    assert p != smoothed_pvalue(old_bag, strangeness("top1", value), tie_uniform(5, start))
    assert [r["reference"] for r in mon.runs] == ["initial", "continued"]


def test_a_fresh_restart_bets_against_the_fresh_reference_only_and_is_saved_with_it(tmp_path) -> None:
    mon = _alarmed()
    start, fresh = mon.n_stream, [0.52, 0.49, 0.55, 0.47, 0.5]
    mon.restart(reference=fresh)
    p = mon.observe_statistic(0.51).p_value
    assert p == smoothed_pvalue(sorted(strangeness("top1", v) for v in fresh), -0.51, tie_uniform(5, start))
    assert mon.runs[1]["reference"] == "fresh" and mon.runs[1]["reference_values"] == fresh
    for v in (0.5, 0.53, 0.48):
        mon.observe_statistic(v)
    again = ConformalMonitor.load(mon.save(tmp_path / "m.json"), CAL)
    assert again.to_dict() == mon.to_dict() and again.p_values == mon.p_values
    assert again.observe_statistic(0.46).p_value == mon.observe_statistic(0.46).p_value


def _rechecksum(data: dict) -> dict:
    return with_checksum({k: v for k, v in data.items() if k != "checksum"})


def _with_run(data: dict, k: int, **fields) -> dict:
    runs = [dict(r) for r in data["runs"]]
    runs[k].update(fields)
    for key in [key for key, value in fields.items() if value is None]:
        del runs[k][key]
    return _rechecksum({**data, "runs": runs})


def test_an_edited_run_reference_is_refused() -> None:
    mon = _alarmed()
    mon.restart(reference=[0.5, 0.52, 0.48])
    for v in (0.5, 0.51, 0.47, 0.49):
        mon.observe_statistic(v)
    data = mon.to_dict()
    edits = {
        "other fresh values": (_with_run(data, 1, reference_values=[0.9, 0.91, 0.92]), "p-values"),
        "fresh read as continued": (_with_run(data, 1, reference="continued", reference_values=None), "p-values"),
        "fresh without its values": (_with_run(data, 1, reference_values=None), "fresh reference"),
        "no reference at schema 3": (_with_run(data, 1, reference=None, reference_values=None), "names no reference"),
        "a fresh first run": (_with_run(data, 0, reference="fresh", reference_values=[0.5]), "first run"),
        "an unknown reference": (_with_run(data, 1, reference="same"), "invalid fields"),
        "a NaN fresh value": (_with_run(data, 1, reference_values=[0.5, "nan"]), "invalid fields"),
    }
    for name, (edited, match) in edits.items():
        with pytest.raises(CalibrationIntegrityError, match=match):
            ConformalMonitor.from_dict(json.loads(json.dumps(edited)), CAL)
        assert name  # each edit is refused with its own reason
    continued = _alarmed()
    continued.restart()
    continued.observe_statistic(0.5)
    as_initial = _with_run(continued.to_dict(), 1, reference="initial")  # the old rule's bag: other p-values
    with pytest.warns(UserWarning, match="first reference alone"), pytest.raises(CalibrationIntegrityError):
        ConformalMonitor.from_dict(as_initial, CAL)
    assert set(RUN_REFERENCES) == {"initial", "continued", "fresh"}


@pytest.mark.parametrize("bad", [[], [float("nan")], [0.5, float("nan")]])
def test_a_bad_fresh_reference_is_refused_before_the_restart(bad) -> None:
    mon = _alarmed()
    with pytest.raises(ConformalError, match="fresh reference"):
        mon.restart(reference=bad)
    assert mon.restarts == 0 and mon.alarm  # nothing changed


def test_a_fresh_reference_from_pools_is_computed_like_the_stream() -> None:
    mon = _alarmed()
    pools = [[0.5, 0.9, 0.2], [0.48], [0.1, 0.55]]
    twin = ConformalMonitor.from_dict(mon.to_dict(), CAL)
    mon.restart(observations=pools)
    twin.restart(reference=[0.9, 0.48, 0.55])  # the top-1 of each pool, best first
    assert mon.runs[1]["reference_values"] == twin.runs[1]["reference_values"] == [0.9, 0.48, 0.55]
    assert mon.observe([0.5, 0.4]).p_value == twin.observe([0.5, 0.4]).p_value
    with pytest.raises(ConformalError, match="not both"):
        _alarmed().restart([0.5], observations=pools)
    with pytest.raises(ConformalError, match="fresh reference"):
        _alarmed().restart(observations=[])
