"""Saved files of every schema version still load (issue 22: "calibration files saved by today's main still load").

``tests/data/saved`` holds one file per schema version of each saved kind, written by the
library itself at the commits its ``README.md`` names (``write_saved_files.py``): the retrieval
calibration (schema 1 and 2), the answer-set calibration (schema 1, on a schema-1 and a
schema-2 retrieval stage) and the drift monitor's state (schema 1, 2 and 3). Each must load with
its key fields intact, and a re-save must load back to the same object at the current version.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/monitor/schema.py

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conformal_rag_plugins.answer_sets.calibration import SCHEMA_VERSION as ANSWER_SET_VERSION
from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.core.errors import CalibrationError, CalibrationIntegrityError, UncheckedGeneratorWarning
from conformal_rag_plugins.monitor import monitor as monitor_module
from conformal_rag_plugins.monitor.monitor import MONITOR_SCHEMA_VERSION, ConformalMonitor
from conformal_rag_plugins.retrieval import calibration as retrieval_module
from conformal_rag_plugins.retrieval.calibration import SCHEMA_VERSION as RETRIEVAL_VERSION
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

SAVED = Path(__file__).resolve().parents[1] / "data" / "saved"
FINGERPRINT = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
#: What every retrieval stage of the saved files holds: 40 questions, 4 misses, two groups of 20.
RETRIEVAL_FIELDS = {
    "alpha_": 0.2,
    "method_": "split",
    "score_family_": "relative",
    "pool_size_": 5,
    "n_calibration_": 40,
    "n_misses_": 4,
    "group_by_": "group",
    "group_fallback_": "keep_all",
}


def _data(name: str) -> dict[str, Any]:
    return json.loads((SAVED / name).read_text(encoding="utf-8"))


def _check_retrieval(cal: RetrievalCalibration, version: int) -> None:
    assert cal.schema_version_ == version
    assert {k: getattr(cal, k) for k in RETRIEVAL_FIELDS} == RETRIEVAL_FIELDS
    assert cal.confidence_level_ == pytest.approx(0.8)
    assert cal.fingerprint_ == FINGERPRINT
    assert len(cal.scores_) == 40 and sum(math.isinf(s) for s in cal.scores_) == 4
    assert cal.threshold_ == cal.recomputed_threshold() == pytest.approx(0.50811)
    assert {g: v["n"] for g, v in cal.groups_.items()} == {"a": 20, "b": 20}
    assert cal.threshold_for("b") == (pytest.approx(0.571174), "group")
    assert len(cal.group_labels_) == 40


def test_every_readable_schema_version_has_a_saved_file() -> None:
    """Bumping a schema version without adding its file here fails."""
    names = {p.name for p in SAVED.glob("*.json")}
    assert {f"retrieval_v{v}.json" for v in retrieval_module._READABLE_VERSIONS} <= names
    assert {f"monitor_v{v}.json" for v in monitor_module._READABLE_VERSIONS} <= names
    for v in retrieval_module._READABLE_VERSIONS:
        assert f"answer_sets_v{ANSWER_SET_VERSION}_retrieval_v{v}.json" in names
    assert (RETRIEVAL_VERSION, MONITOR_SCHEMA_VERSION, ANSWER_SET_VERSION) == (2, 3, 1)
    for name in names:
        version = _data(name)["schema_version"]
        assert (
            name.startswith(f"retrieval_v{version}")
            or name.startswith(f"monitor_v{version}")
            or (name.startswith(f"answer_sets_v{version}"))
        ), name


@pytest.mark.parametrize("version", [1, 2])
def test_a_retrieval_calibration_loads_and_resaves(tmp_path: Path, version: int) -> None:
    name = f"retrieval_v{version}.json"
    cal = RetrievalCalibration.load(SAVED / name)
    _check_retrieval(cal, version)
    assert cal.to_dict() == _data(name)  # as loaded, a re-save is the same file (a monitor keeps its checksum)
    if version == 1:
        assert cal.gold_ranks_ == () and cal.corpus_ == {}
    else:
        assert len(cal.gold_ranks_) == 40 and cal.to_dict()["corpus"] is None
    current = replace(cal, schema_version_=RETRIEVAL_VERSION)
    again = RetrievalCalibration.load(current.save(tmp_path / "again.json"))
    assert again == cal and again.schema_version_ == RETRIEVAL_VERSION
    written = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    assert written["schema_version"] == RETRIEVAL_VERSION and "gold_ranks" in written and "corpus" in written


@pytest.mark.parametrize("retrieval_version", [1, 2])
def test_an_answer_set_calibration_loads_and_resaves(tmp_path: Path, retrieval_version: int) -> None:
    name = f"answer_sets_v{ANSWER_SET_VERSION}_retrieval_v{retrieval_version}.json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = AnswerSetCalibration.load(SAVED / name)
    unchecked = [w for w in caught if issubclass(w.category, UncheckedGeneratorWarning)]
    # the schema-1-era file was saved before the generator record: it loads, with the warning
    assert bool(unchecked) == (retrieval_version == 1)
    _check_retrieval(cal.retrieval_, retrieval_version)
    assert (cal.alpha_, cal.method_, cal.alpha_retrieval_, cal.n_samples_, cal.model_) == (
        0.4,
        "bonferroni",
        0.2,
        4,
        "fake-llm",
    )
    assert cal.alpha_generation_ == pytest.approx(0.2)
    assert cal.clustering_ == {"method": "rougeL", "tau": 0.7}
    assert cal.retrieval_threshold_ == pytest.approx(0.50811) and cal.generation_threshold_ == -0.5
    assert len(cal.generation_scores_) == 40
    assert (cal.generator_ is None) == (retrieval_version == 1)
    # saved before the pool-miss rule (issue 33): the same thresholds, but never flagged guaranteed any more
    assert _data(name)["guaranteed"] is True and cal.guaranteed_ is False
    assert "with_current_rule" in cal.reason_
    resaved = cal.to_dict()
    assert {k: v for k, v in resaved.items() if k not in ("guaranteed", "checksum")} == {
        k: v for k, v in _data(name).items() if k not in ("guaranteed", "checksum")
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedGeneratorWarning)
        again = AnswerSetCalibration.load(cal.save(tmp_path / "again.json"))
    assert again == cal and again.to_dict()["schema_version"] == ANSWER_SET_VERSION


def test_a_schema_1_monitor_state_loads_and_resaves_at_the_current_schema(tmp_path: Path) -> None:
    cal = RetrievalCalibration.load(SAVED / "retrieval_v1.json")
    with pytest.warns(UserWarning, match="before schema 2"):
        monitor = ConformalMonitor.load(SAVED / "monitor_v1.json", cal)
    data = _data("monitor_v1.json")
    assert (monitor.statistic, monitor.delta, monitor.alarm_at, monitor.n_stream) == ("top1", 0.05, 20, 60)
    assert monitor.grouped is False  # schema 1 took set sizes at the pooled threshold
    assert (monitor.coverage_delta, monitor.aci_gamma, monitor.aci_alpha) == (0.05, 0.005, data["aci_alpha"])
    assert [lab[0] for lab in monitor.labels] == [True, False, True, True]  # nonconformity 0.2 <= threshold
    assert monitor.identity == data["calibration"]
    saved = monitor.to_dict()
    assert saved["schema_version"] == MONITOR_SCHEMA_VERSION == 3 and len(saved["runs"]) == 1
    assert saved["runs"][0]["reference"] == "initial"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = ConformalMonitor.load(monitor.save(tmp_path / "again.json"), cal)
    assert again.to_dict() == saved and again.p_values == monitor.p_values


def test_a_schema_2_monitor_state_loads_and_resaves(tmp_path: Path) -> None:
    """Its restart reused the first reference: replayed so, with a warning, and re-saved naming it ``initial``."""
    cal = RetrievalCalibration.load(SAVED / "retrieval_v2.json")
    with pytest.warns(UserWarning, match="restarted from the first reference alone"):
        monitor = ConformalMonitor.load(SAVED / "monitor_v2.json", cal)
    data = _data("monitor_v2.json")
    assert monitor.grouped is True and monitor.label_groups == ["a", "b", "a", "b"]
    assert [(r["start"], r["delta"], r["alarm_at"]) for r in data["runs"]] == [(0, 0.05, 20), (60, 0.025, None)]
    assert monitor.n_stream == 65 and monitor.alarm_at is None  # the restarted run has not alarmed
    saved = monitor.to_dict()
    assert saved["schema_version"] == 3 and [r["reference"] for r in saved["runs"]] == ["initial", "initial"]
    unchanged = ("stream", "p_values", "log_martingale", "alarm_at", "labels", "reference", "calibration")
    assert {k: saved[k] for k in unchanged} == {k: data[k] for k in unchanged}
    with pytest.warns(UserWarning, match="restarted from the first reference alone"):
        again = ConformalMonitor.load(monitor.save(tmp_path / "again.json"), cal)
    assert again.to_dict() == saved


def test_a_schema_3_monitor_state_loads_and_resaves(tmp_path: Path) -> None:
    """The restart continued the bag (reference and every earlier query): a re-save is the same file."""
    cal = RetrievalCalibration.load(SAVED / "retrieval_v2.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor = ConformalMonitor.load(SAVED / "monitor_v3.json", cal)
    data = _data("monitor_v3.json")
    assert [(r["start"], r["delta"], r["alarm_at"], r["reference"]) for r in data["runs"]] == [
        (0, 0.05, 20, "initial"),
        (60, 0.025, None, "continued"),
    ]
    assert monitor.n_stream == 65 and monitor.grouped is True
    assert monitor.to_dict() == data
    again = ConformalMonitor.load(monitor.save(tmp_path / "again.json"), cal)
    assert again.to_dict() == data


def test_the_version_checks_can_fail(tmp_path: Path) -> None:
    """Negative controls: an unknown version, and a state loaded against another calibration, are refused."""
    future = _data("retrieval_v2.json") | {"schema_version": RETRIEVAL_VERSION + 1}
    with pytest.raises(CalibrationIntegrityError, match="schema"):
        RetrievalCalibration.from_dict(future)
    edited = _data("retrieval_v1.json") | {"schema_version": 2}  # a v1 file relabelled: it lacks v2's fields
    with pytest.raises(CalibrationIntegrityError):
        RetrievalCalibration.from_dict(edited)
    v1 = RetrievalCalibration.load(SAVED / "retrieval_v1.json")  # same threshold and fingerprint, another file
    with pytest.raises(CalibrationError, match="belongs to another calibration"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ConformalMonitor.load(SAVED / "monitor_v2.json", v1)


def test_a_file_saved_before_the_pool_miss_rule_serves_its_thresholds_unflagged(tmp_path: Path) -> None:
    """Issue 33: a file without ``threshold_rule`` loads as before, but its sets are not flagged guaranteed."""
    from conformal_rag_plugins.core.errors import GuaranteeCutWarning
    from conformal_rag_plugins.core.quantile import THRESHOLD_RULE
    from conformal_rag_plugins.retrieval.serving import serve_set

    cal = RetrievalCalibration.load(SAVED / "retrieval_v2.json")
    assert cal.threshold_rule_ == "plain-rank" and "with_current_rule" in cal.stale_rule_reason_
    with pytest.warns(GuaranteeCutWarning, match="before thresholds accounted for pool misses"):
        served = serve_set(cal, [0.9, 0.5, 0.2], [{}, {}, {}], query="q")
    assert served.decision.guaranteed is False
    current = cal.with_current_rule()
    assert current.threshold_rule_ == THRESHOLD_RULE and current.stale_rule_reason_ == ""
    assert current.threshold_ >= cal.threshold_  # the rank only grows
    again = RetrievalCalibration.load(current.save(tmp_path / "current.json"))
    assert again.threshold_ == current.threshold_ and again.groups_ == current.groups_
    assert json.loads((tmp_path / "current.json").read_text(encoding="utf-8"))["threshold_rule"] == THRESHOLD_RULE
