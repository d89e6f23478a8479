"""Hostile saved files (issue 33, item 6): one-field edits with the checksum recomputed, and unreadable numbers.

Every edit recomputes the SHA-256 checksum as ``save`` does (the files are unsigned), so only a
cross-check between fields can refuse it. Each refusal is a ``CalibrationIntegrityError`` with a
one-line message, which the command line prints as one line with exit code 2.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.engine import query_sampling
from conformal_rag_plugins.answer_sets.options import SamplingOptions
from conformal_rag_plugins.core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    CorpusChangedWarning,
    GeneratorMismatchError,
    UncheckedCorpusWarning,
)
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.corpus_filter import corpus_record
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.groups import with_chunk_groups
from conformal_rag_plugins.retrieval.served_checks import check_host
from conformal_rag_plugins.storage.jsonio import with_checksum

SAVED = Path(__file__).resolve().parents[1] / "data" / "saved"
FP = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")


def _pools(n: int = 40, seed: int = 3) -> list[PoolObservation]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.sort(rng.uniform(0.2, 0.9, 5))[::-1]
        out.append(PoolObservation(scores, (int(rng.integers(5)),), question_id=f"q{i:03d}"))
    return out


def _retrieval() -> RetrievalCalibration:
    return (
        RetrievalConformalizer(0.8, score="relative")
        .conformalize_pools(_pools(), fingerprint=FP, pool_size=5)
        .calibration_
    )


def _edit(path: Path, change: Callable[[dict[str, Any]], None], out: Path | None = None) -> Path:
    """Change the saved JSON and recompute its checksum the way the project does."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    body = {k: v for k, v in data.items() if k != "checksum"}
    target = out or path
    target.write_text(json.dumps(with_checksum(body), indent=2), encoding="utf-8")
    return target


def _refused(load: Callable[[], Any], *words: str) -> str:
    with pytest.raises(CalibrationIntegrityError) as info:
        load()
    message = str(info.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


# --- numbers and nesting that Python's parser reads but a saved file never holds ------------------------------


def _with_text(path: Path, old: str, new: str, out: Path) -> Path:
    text = path.read_text(encoding="utf-8")
    assert old in text
    out.write_text(text.replace(old, new, 1), encoding="utf-8")
    return out


UNREADABLE = {
    "1e999": ('"alpha": 0.2', '"alpha": 1e999', "1e999"),
    "-1e999 score": ('"scores": [\n    ', '"scores": [\n    -1e999, ', "1e999"),
    "5000 digits": ('"n": 40', '"n": ' + "4" * 5000, "5000 digits"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_unreadable_numbers_in_a_retrieval_file_are_one_line_errors(tmp_path, case) -> None:
    old, new, words = UNREADABLE[case]
    path = _with_text(SAVED / "retrieval_v2.json", old, new, tmp_path / "cal.json")
    _refused(lambda: RetrievalCalibration.load(path), str(path), words)


def test_unreadable_numbers_in_monitor_and_answer_set_files(tmp_path) -> None:
    cal = RetrievalCalibration.load(SAVED / "retrieval_v2.json")
    state = _with_text(SAVED / "monitor_v2.json", '"delta": 0.05', '"delta": 1e999', tmp_path / "m.json")
    _refused(lambda: ConformalMonitor.load(state, cal), "1e999")
    state = _with_text(SAVED / "monitor_v2.json", '"seed": 0', '"seed": ' + "9" * 5000, tmp_path / "m2.json")
    _refused(lambda: ConformalMonitor.load(state, cal), "5000 digits")
    answers = _with_text(
        SAVED / "answer_sets_v1_retrieval_v2.json", '"alpha": 0.4', '"alpha": 1e999', tmp_path / "a.json"
    )
    _refused(lambda: AnswerSetCalibration.load(answers), "1e999")


def test_deep_nesting_is_a_one_line_error(tmp_path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"kind": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    _refused(lambda: RetrievalCalibration.load(path), "nested too deeply")


# --- answer sets ---------------------------------------------------------------------------------------------


def _infinite_generation_threshold(tmp_path: Path) -> Path:
    ret = _retrieval()
    gen = [math.inf] * (len(ret.scores_) - 3) + [-0.5, -0.4, -0.3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers = AnswerSetCalibration.from_stages(ret, gen, alpha=0.4, n_samples=4, model="m", clustering={})
    assert math.isinf(answers.generation_threshold_)
    return answers.save(tmp_path / "answers.json")


def test_an_infinite_generation_threshold_edited_to_a_number_is_refused(tmp_path) -> None:
    path = _infinite_generation_threshold(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isinf(AnswerSetCalibration.load(path).generation_threshold_)  # the untouched file loads
        _edit(path, lambda d: d.__setitem__("generation_threshold", 0.01))
        _refused(lambda: AnswerSetCalibration.load(path), "generation_threshold", "0.01")


def test_another_n_samples_names_the_field() -> None:
    with pytest.raises(GeneratorMismatchError) as info:
        query_sampling(SimpleNamespace(n_samples_=4), SamplingOptions(n_samples=5))
    assert info.value.fields == ("sampling.n_samples",)
    assert isinstance(info.value, CalibrationError)  # what was raised before, still caught
    assert "n_samples=5 differs from the calibrated M=4" in str(info.value)
    assert query_sampling(SimpleNamespace(n_samples_=4), SamplingOptions(n_samples=4)).n_samples == 4


# --- the drift monitor's statistic -----------------------------------------------------------------------------


def _monitor(tmp_path: Path, statistic: str = "top1") -> tuple[RetrievalCalibration, Path]:
    cal = _retrieval()
    monitor = ConformalMonitor.from_observations(cal, _pools(30, seed=5), statistic=statistic)
    for obs in _pools(12, seed=9):
        monitor.observe(obs.scores)
    return cal, monitor.save(tmp_path / "monitor.json")


def test_a_monitor_statistic_edited_top1_to_gap_is_refused(tmp_path) -> None:
    cal, path = _monitor(tmp_path)
    assert ConformalMonitor.load(path, cal).statistic == "top1"
    _edit(path, lambda d: d.__setitem__("statistic", "gap"))
    _refused(lambda: ConformalMonitor.load(path, cal), "statistic is 'gap'", "'top1' statistics")


def test_a_monitor_statistic_is_checked_against_the_stored_values(tmp_path) -> None:
    """Files without the second record (saved before it) are checked on what the values can tell."""
    cal, path = _monitor(tmp_path)

    def to(statistic: str, value: Any) -> Callable[[dict[str, Any]], None]:
        def change(d: dict[str, Any]) -> None:
            d.pop("reference_statistic")
            d["statistic"] = statistic
            d["reference"][0] = value

        return change

    old = tmp_path / "old.json"
    _edit(path, to("set_size", 2.5), old)
    _refused(lambda: ConformalMonitor.load(old, cal), "set size", "2.5")
    _edit(path, to("gap", -0.25), old)
    _refused(lambda: ConformalMonitor.load(old, cal), "gap", "-0.25")
    _edit(path, to("top1", "+inf"), old)
    _refused(lambda: ConformalMonitor.load(old, cal), "top-1", "inf")


# --- grouped retrieval calibrations ------------------------------------------------------------------------------


def test_a_removed_chunk_group_key_is_refused(tmp_path) -> None:
    cal = _retrieval()
    labels = ["wiki" if i % 2 else "faq" for i in range(len(cal.scores_))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grouped = with_chunk_groups(cal, labels, "collection")
    path = grouped.save(tmp_path / "cal.json")
    assert RetrievalCalibration.load(path).chunk_group_key_ == "collection"
    _edit(path, lambda d: d.pop("chunk_group_key"))
    _refused(lambda: RetrievalCalibration.load(path), "chunk_group_key is missing", "per-query")


def test_a_query_grouped_file_says_so_and_the_older_file_still_loads(tmp_path) -> None:
    path = tmp_path / "cal.json"
    path.write_text((SAVED / "retrieval_v2.json").read_text(encoding="utf-8"), encoding="utf-8")
    loaded = RetrievalCalibration.load(path)  # saved before the record: no "grouping", keeps its checksum
    assert loaded.to_dict() == json.loads(path.read_text(encoding="utf-8"))
    fresh = RetrievalCalibration.load(_edit(path, lambda d: d.__setitem__("grouping", "query")))
    assert fresh.to_dict()["grouping"] == "query"
    _edit(path, lambda d: d.__setitem__("chunk_group_key", "group"))
    _refused(lambda: RetrievalCalibration.load(path), "grouping is 'query'")


# --- a calibration that records no collection ---------------------------------------------------------------------


def test_a_drop_in_says_when_it_cannot_check_the_collection() -> None:
    cal = _retrieval()
    assert not cal.corpus_  # bare pools: no collection to record
    with pytest.warns(UncheckedCorpusWarning, match="not checked"):
        check_host(cal, FP, lambda: ["a", "b"], "ConformalRetriever")
    recorded = replace(cal, corpus_=corpus_record(["a", "b"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_host(recorded, FP, lambda: ["a", "b"], "ConformalRetriever")  # the same collection: silent
    with pytest.warns(CorpusChangedWarning):
        check_host(recorded, FP, lambda: ["a", "c"], "ConformalRetriever")
