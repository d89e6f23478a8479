"""A saved monitor state is one unit with its calibration (issue 41, section 6: half-written outputs).

``conformal-rag monitor --save-monitor`` wrote the calibration and then the state as two files; a run
killed between them left a new ``state.calibration.json`` beside an old ``state.json``, and the old
state could no longer be resumed (its calibration was overwritten). The state now carries its
calibration (``calibration_record``, covered by its checksum and signature) and is written first, so
it resumes alone; a record that is not the calibration the state names is refused, and a state saved
before the record still needs its calibration and says so.
"""

from __future__ import annotations

import json

import pytest

from conformal_rag_plugins.core.errors import CalibrationError, CalibrationIntegrityError
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.storage.jsonio import with_checksum


def _calibration(shift: float = 0.0) -> RetrievalCalibration:
    fp = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "all-MiniLM-L6-v2", 384, "cosine", "dense")
    scores = tuple(i / 20 + shift for i in range(1, 21))
    return RetrievalCalibration(scores[-1], 0.1, "split", "similarity", 50, 20, 0, scores, fp)


CALIBRATION = _calibration()


@pytest.fixture
def state(tmp_path):
    monitor = ConformalMonitor(CALIBRATION, reference=[0.8, 0.7, 0.9, 0.85, 0.75], delta=0.05)
    for value in (0.6, 0.65):
        monitor.observe_statistic(value)
    return monitor.save(tmp_path / "state.json")


def test_the_state_resumes_alone_with_the_calibration_it_carries(state, tmp_path) -> None:
    resumed = ConformalMonitor.load(state)
    assert resumed.n_stream == 2 and resumed.calibration.to_dict() == CALIBRATION.to_dict()
    assert ConformalMonitor.saved_calibration(state).to_dict() == CALIBRATION.to_dict()
    # what a run killed between the two files left: another calibration beside the state
    _calibration(0.05).save(tmp_path / "state.calibration.json")
    assert ConformalMonitor.load(state).p_values == resumed.p_values  # nothing lost
    with pytest.raises(CalibrationError, match="another calibration"):
        ConformalMonitor.load(state, RetrievalCalibration.load(tmp_path / "state.calibration.json"))


def test_a_record_that_is_not_the_named_calibration_is_refused(state) -> None:
    data = json.loads(state.read_text())
    data.pop("checksum")
    data["calibration_record"] = _calibration(0.05).to_dict()  # a valid calibration, but not this state's
    state.write_text(json.dumps(with_checksum(data)))
    with pytest.raises(CalibrationIntegrityError, match="embedded calibration is not the calibration"):
        ConformalMonitor.load(state)


def test_a_state_saved_before_the_record_needs_its_calibration(state) -> None:
    data = json.loads(state.read_text())
    data.pop("checksum"), data.pop("calibration_record")
    state.write_text(json.dumps(with_checksum(data)))
    with pytest.raises(CalibrationError, match="saved before states carried their calibration"):
        ConformalMonitor.load(state)
    old = ConformalMonitor.load(state, CALIBRATION)
    assert old.n_stream == 2
    assert "calibration_record" not in old.to_dict()  # re-saved as it was: its checksum still verifies
    assert old.to_dict()["checksum"] == with_checksum(data)["checksum"]
