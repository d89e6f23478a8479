"""Issue 41 item 6: saved-file edits that change what a file means, refused on load.

Duplicate keys: ``json.loads`` keeps the last, so a second ``"threshold"`` placed before the real one
reads as the real one (the checksum and even the HMAC signature verify) while a first-wins reader
reads the planted one. A ``score_family`` edited to ``similarity`` serves a relative threshold on
another scale (the threshold recomputed from the scores does not depend on the family). Every edit
below recomputes the checksum as ``save`` does, so only the parser and the cross-checks can refuse it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.core.errors import CalibrationIntegrityError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.storage.jsonio import with_checksum

SAVED = Path(__file__).resolve().parents[1] / "data" / "saved"
FP = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
KEY = "a signing key"


def _pools(n: int = 60, seed: int = 3) -> list[PoolObservation]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.sort(rng.uniform(0.2, 0.9, 8))[::-1]
        out.append(PoolObservation(scores, (int(rng.geometric(0.5)) - 1,) if i % 15 else (), question_id=f"q{i:03d}"))
    return out


def _calibration(score: str) -> RetrievalCalibration:
    conformalizer = RetrievalConformalizer(0.8, score=score)
    return conformalizer.conformalize_pools(_pools(), fingerprint=FP, pool_size=8).calibration_


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(with_checksum({k: v for k, v in data.items() if k != "checksum"})), encoding="utf-8")
    return path


def _refused(load: Callable[[], Any], *words: str) -> str:
    with pytest.raises(CalibrationIntegrityError) as info:
        load()
    message = str(info.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


def _plant_first(path: Path, key: str, value: str) -> Path:
    """A second ``key`` as the object's first member: ``json.loads`` keeps the real (last) one."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("{")
    path.write_text("{" + f'"{key}": {value}, ' + text[1:], encoding="utf-8")
    return path


# --- duplicate keys ----------------------------------------------------------------------------------------------


def test_a_duplicate_key_in_a_signed_calibration_is_refused(tmp_path) -> None:
    path = _calibration("relative").save(tmp_path / "cal.json", signing_key=KEY)
    assert RetrievalCalibration.load(path, signing_key=KEY).threshold_ > 0.0  # the untouched file verifies
    _plant_first(path, "threshold", "0.001")
    json.loads(path.read_text(encoding="utf-8"))  # valid JSON whose last "threshold" is the signed one
    _refused(lambda: RetrievalCalibration.load(path, signing_key=KEY), str(path), "'threshold' twice")
    _refused(lambda: RetrievalCalibration.load(path), "'threshold' twice")


def test_a_duplicate_key_deep_in_a_retrieval_file_is_refused(tmp_path) -> None:
    path = _calibration("relative").save(tmp_path / "cal.json")
    text = path.read_text(encoding="utf-8")
    old = '"fingerprint": {'
    assert old in text
    path.write_text(text.replace(old, old + '"framework": "llamaindex", ', 1), encoding="utf-8")
    _refused(lambda: RetrievalCalibration.load(path), "'framework' twice")


def test_a_duplicate_key_in_answer_set_and_monitor_files_is_refused(tmp_path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text((SAVED / "answer_sets_v1_retrieval_v2.json").read_text(encoding="utf-8"), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AnswerSetCalibration.load(answers)  # loads before the edit
        _refused(lambda: AnswerSetCalibration.load(_plant_first(answers, "alpha", "0.9")), "'alpha' twice")
    cal = RetrievalCalibration.load(SAVED / "retrieval_v2.json")
    state = tmp_path / "monitor.json"
    state.write_text((SAVED / "monitor_v2.json").read_text(encoding="utf-8"), encoding="utf-8")
    ConformalMonitor.load(state, cal)
    _refused(lambda: ConformalMonitor.load(_plant_first(state, "delta", "0.5"), cal), "'delta' twice")


# --- the score family ----------------------------------------------------------------------------------------------


def test_a_relative_file_edited_to_similarity_is_refused(tmp_path) -> None:
    cal = _calibration("relative")
    assert cal.gold_ranks_ and 0.0 < cal.threshold_ < 1.0  # a relative threshold: 0 means "the top one only"
    path = cal.save(tmp_path / "cal.json")
    _refused(lambda: RetrievalCalibration.load(_edit(path, lambda d: d.update(score_family="similarity"))),
             "score_family is 'similarity'", "'relative' score")  # fmt: skip
    # a file without gold ranks (null: never recorded) is told by its scores alone
    _refused(lambda: RetrievalCalibration.load(_edit(path, lambda d: d.update(gold_ranks=None))), "exactly 0")


def test_a_rank_file_edited_to_similarity_is_refused(tmp_path) -> None:
    path = _calibration("rank").save(tmp_path / "cal.json")
    _refused(lambda: RetrievalCalibration.load(_edit(path, lambda d: d.update(score_family="similarity"))),
             "equals its gold rank")  # fmt: skip
    _refused(lambda: RetrievalCalibration.load(_edit(path, lambda d: d.update(gold_ranks=None))), "whole number")


def test_similarity_files_still_load(tmp_path) -> None:
    cal = _calibration("similarity")
    assert RetrievalCalibration.load(cal.save(tmp_path / "cal.json")).threshold_ == cal.threshold_
    assert RetrievalCalibration.load(SAVED / "retrieval_v2.json").score_family_  # the stored files of each version
    assert RetrievalCalibration.load(SAVED / "retrieval_v1.json").score_family_


# --- the record of the questions that tuned the host -----------------------------------------------------------------


def test_an_emptied_selection_is_refused(tmp_path) -> None:
    """``selection: {}`` on a file whose family (or host) was chosen on optimisation questions.

    ``report`` leaves out ``selection.optimisation_question_ids``; emptied, it counted those questions as held
    out. The file now also records ``n_optimisation`` beside ``selection``.
    """
    cal = _calibration("auto")
    n_opt = cal.selection_["n_optimisation"]
    assert n_opt >= 1 and len(cal.selection_["optimisation_question_ids"]) >= 1
    path = cal.save(tmp_path / "cal.json")
    assert json.loads(path.read_text(encoding="utf-8"))["n_optimisation"] == n_opt
    assert RetrievalCalibration.load(path).selection_ == cal.selection_
    _refused(lambda: RetrievalCalibration.load(_edit(path, lambda d: d.update(selection={}))),
             f"n_optimisation = {n_opt} but selection records 0", "counted as held out")  # fmt: skip
    plain = _calibration("similarity").save(tmp_path / "plain.json")
    assert json.loads(plain.read_text(encoding="utf-8"))["n_optimisation"] == 0
    _refused(lambda: RetrievalCalibration.load(_edit(plain, lambda d: d["selection"].update(n_optimisation=5))),
             "n_optimisation = 0 but selection records 5")  # fmt: skip


def test_a_file_saved_before_the_record_keeps_its_checksum(tmp_path) -> None:
    cal = _calibration("auto")
    path = cal.save(tmp_path / "cal.json")
    older = _edit(path, lambda d: d.pop("n_optimisation"))
    loaded = RetrievalCalibration.load(older)
    assert loaded.to_dict() == json.loads(older.read_text(encoding="utf-8"))  # re-saved unchanged
