"""Issue 33 item 4: a query-time ``group_by`` function is checked on the calibration questions, not by name.

A calibration grouped by a function records its questions; a drop-in built with ``group_by`` reruns
the function on them and refuses one that puts a question in another group. Without recorded
questions (a metadata-key calibration, an older file) the sets are served but say they are not
guaranteed. Before the fix any function was accepted and its sets said ``guaranteed=True``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import pytest

from conformal_rag_plugins import RetrievalCalibration, ServingOptions, calibrate_host
from conformal_rag_plugins.core.errors import CalibrationIntegrityError, ConformalError, GuaranteeCutWarning
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import serve_set
from conformal_rag_plugins.storage.jsonio import with_checksum

from .test_host import ListHost, _examples

N = 80
POOL = [0.99, 0.97, 0.95, 0.9, 0.8, 0.6, 0.4, 0.2]  # best first


def tenant(question: str) -> str:
    """The group of ``q{k}``: the same rule as the examples' ``tenant`` metadata."""
    return f"t{int(question[1:]) % 2}"


def _calibrate(group_by) -> RetrievalCalibration:
    options = RetrievalOptions(0.8, score="similarity", group_by=group_by, progress=False)
    return calibrate_host(ListHost(N), _examples(N), options)


@pytest.fixture(scope="module")
def by_function() -> RetrievalCalibration:
    return _calibrate(tenant)


def _serve(cal: RetrievalCalibration, group_by, query: str = "q3"):
    options = ServingOptions(group_by=group_by)
    options.check(cal)
    return serve_set(cal, POOL, [{}] * len(POOL), options, query=query).decision


def test_a_function_grouped_calibration_records_its_questions(by_function, tmp_path) -> None:
    assert by_function.group_questions_ == tuple(ex.question for ex in _examples(N))
    assert by_function.group_labels_ == tuple(tenant(q) for q in by_function.group_questions_)
    loaded = RetrievalCalibration.load(by_function.save(tmp_path / "cal.json"))
    assert loaded.group_questions_ == by_function.group_questions_
    assert _calibrate("tenant").group_questions_ == ()  # a metadata key: nothing recorded


def test_the_calibrations_function_is_served_guaranteed(by_function) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", GuaranteeCutWarning)
        decision = _serve(by_function, tenant)
    assert decision.guaranteed, decision.reason
    # another function object with the same outputs on the calibration questions is the same rule
    assert _serve(by_function, lambda q: "t1" if int(q[1:]) % 2 else "t0").guaranteed


def test_another_function_is_refused_naming_a_question(by_function) -> None:
    def everyone_in_t0(question: str) -> str:
        return "t0"

    with pytest.raises(ConformalError, match=r"40 of 80 calibration questions in another group, e\.g\. 'q1' in 't0'"):
        ServingOptions(group_by=everyone_in_t0).check(by_function)
    with pytest.raises(ConformalError, match="another group"):
        ConformalNodePostprocessor(calibration=by_function, options=ServingOptions(group_by=everyone_in_t0))

    def boom(question: str) -> str:
        raise RuntimeError("tenant service down")

    with pytest.raises(ConformalError, match="group_by raised RuntimeError: tenant service down for the calibration"):
        ServingOptions(group_by=boom).check(by_function)


def test_an_unchecked_function_is_not_guaranteed_and_says_why(by_function) -> None:
    by_key = _calibrate("tenant")  # the same groups, but the calibration cannot rerun a function
    with pytest.warns(GuaranteeCutWarning, match="not checked against the calibration"):
        decision = _serve(by_key, tenant)
    assert not decision.guaranteed and "grouped by 'tenant'" in decision.reason
    # an explicit group= is the caller's statement of the group: nothing to check
    explicit = serve_set(by_key, POOL, [{}] * len(POOL), ServingOptions(group="t1"), query="q3").decision
    assert explicit.guaranteed


def test_an_older_file_without_questions_loads_and_is_unchecked(by_function) -> None:
    data = {k: v for k, v in by_function.to_dict().items() if k not in ("group_questions", "checksum")}
    old = RetrievalCalibration.from_dict(with_checksum(data))
    assert old.group_questions_ == () and old.groups_ == by_function.groups_
    with pytest.warns(GuaranteeCutWarning):
        assert not _serve(old, tenant).guaranteed


def test_a_file_whose_questions_disagree_with_its_labels_is_refused(by_function) -> None:
    data = json.loads(json.dumps(by_function.to_dict()))
    data["group_questions"] = data["group_questions"][:-1]
    with pytest.raises(CalibrationIntegrityError, match="79 group questions for n = 80"):
        RetrievalCalibration.from_dict(with_checksum({k: v for k, v in data.items() if k != "checksum"}))


def _resaved(cal: RetrievalCalibration, **changes) -> dict:
    data = {k: v for k, v in json.loads(json.dumps(cal.to_dict())).items() if k != "checksum"}
    data.update(changes)
    return with_checksum({k: v for k, v in data.items() if v is not None})


def test_replaced_group_questions_are_refused(by_function) -> None:
    """Issue 41 item 6: questions that a wrong function maps to the recorded groups no longer pass its check.

    Shifting every question by one (``q0`` -> ``q1``) makes ``wrong`` (the other parity) reproduce the
    recorded labels on the replaced texts: before the fix the file loaded and ``wrong`` served its sets
    flagged guaranteed.
    """

    def wrong(question: str) -> str:
        return f"t{(int(question[1:]) + 1) % 2}"

    shifted = [f"q{int(q[1:]) + 1}" for q in by_function.group_questions_]
    with pytest.raises(ConformalError, match="another group"):
        ServingOptions(group_by=wrong).check(by_function)  # the true questions catch the wrong function
    with pytest.raises(CalibrationIntegrityError, match="80 of 80 do not give the calibration question digest"):
        RetrievalCalibration.from_dict(_resaved(by_function, group_questions=shifted))
    one = list(by_function.group_questions_)
    one[5] = "q6"
    with pytest.raises(CalibrationIntegrityError, match=r"1 of 80 do not .* \(question 5: 'q6'\)"):
        RetrievalCalibration.from_dict(_resaved(by_function, group_questions=one))


def test_group_questions_are_checked_with_their_example_ids(tmp_path) -> None:
    examples = [replace(ex, id=f"id-{k}") for k, ex in enumerate(_examples(N))]
    options = RetrievalOptions(0.8, score="similarity", group_by=tenant, progress=False)
    cal = calibrate_host(ListHost(N), examples, options)
    assert cal.group_example_ids_ == tuple(ex.id for ex in examples)
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "cal.json"))
    assert loaded.group_example_ids_ == cal.group_example_ids_ and loaded.group_questions_ == cal.group_questions_
    # without the ids the questions cannot give their digests: removing the record is refused too
    data = _resaved(cal)
    data.pop("group_example_ids")
    with pytest.raises(CalibrationIntegrityError, match="do not give the calibration question digest"):
        RetrievalCalibration.from_dict(with_checksum({k: v for k, v in data.items() if k != "checksum"}))
