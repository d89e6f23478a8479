"""An answer-set calibration without a generator record is not guaranteed, nor is its saved file (issue 41, 5).

Without ``generator_`` no query can check that it uses the calibrated LLM, sampling settings, prompt
and embedder, so every served set already said ``guaranteed=False``; ``AnswerSetCalibration.guaranteed_``
and the saved ``"guaranteed"`` still said True. Now both say False with the reason, an older file without
a record loads (saying so), and a host that cannot describe its LLM warns at calibration time.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, StageProvenance
from conformal_rag_plugins.answer_sets.identity import generator_record
from conformal_rag_plugins.core.errors import CoverageCeilingWarning, UncheckedGeneratorWarning
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.report.data import answer_set_summary
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
N = 60
RECORD = generator_record({"llm": {"class": "Fake", "name": "toy"}, "sampling": {"temperature": 1.0, "n_samples": 4}})


def _calibration(generator: dict | None) -> AnswerSetCalibration:
    """Bonferroni at alpha = 0.4 on 60 questions without a miss: both thresholds finite."""
    scores = tuple(i / N for i in range(N))
    retrieval = RetrievalCalibration(conformal_quantile(scores, 0.1), 0.1, "split", "relative", 5, N, 0, scores, FP)
    return AnswerSetCalibration.from_stages(
        retrieval,
        [-1.0 + i / (2 * N) for i in range(N)],
        alpha=0.4,
        n_samples=4,
        model="fake",
        clustering={"method": "exact"},
        provenance=StageProvenance(generator=generator),
    )


def test_without_a_record_the_calibration_and_its_file_say_not_guaranteed() -> None:
    """Fails before the fix: guaranteed_ and the saved field were True without a record."""
    checked, unchecked = _calibration(RECORD), _calibration(None)
    assert checked.rule().guaranteed and unchecked.rule().guaranteed  # the same finite thresholds
    assert checked.guaranteed_ is True and checked.reason_ == "" and checked.to_dict()["guaranteed"] is True
    assert unchecked.guaranteed_ is False
    assert "no generator record" in unchecked.reason_ and unchecked.reason_ == unchecked.unchecked_reason_
    assert unchecked.rule_reason_ == ""  # the rule itself holds: only the check is missing
    assert unchecked.to_dict()["guaranteed"] is False


def test_an_older_file_without_a_record_loads_and_says_why(tmp_path) -> None:
    """A file saved with ``"guaranteed": true`` and no record: loads with the warning, not guaranteed, no crash."""
    data = _calibration(RECORD).to_dict()
    old = {k: v for k, v in data.items() if k not in ("generator", "checksum")}
    assert old["guaranteed"] is True  # as the older version wrote it
    path = tmp_path / "old.json"
    path.write_text(json.dumps(with_checksum(old)))
    with pytest.warns(UncheckedGeneratorWarning, match="guaranteed_"):
        loaded = AnswerSetCalibration.load(path)
    assert loaded.generator_ is None and loaded.guaranteed_ is False and "no generator record" in loaded.reason_
    assert (loaded.retrieval_threshold_, loaded.generation_threshold_) == (
        _calibration(RECORD).retrieval_threshold_,
        _calibration(RECORD).generation_threshold_,
    )
    resaved = tmp_path / "resaved.json"
    loaded.save(resaved)
    assert json.loads(resaved.read_text())["guaranteed"] is False
    with pytest.warns(UncheckedGeneratorWarning):
        assert AnswerSetCalibration.load(resaved).guaranteed_ is False


def test_calibrating_on_a_host_that_cannot_describe_its_llm_warns_that_it_is_unchecked() -> None:
    """No CoverageCeilingWarning (the ceiling is fine): an UncheckedGeneratorWarning naming the missing record."""
    from .test_engine_guarantee_holes import World, _calibrate

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = _calibrate(World(60, miss_every=20), method="hmp", confidence_level=0.5)
    assert cal.rule().guaranteed and not cal.guaranteed_ and cal.generator_ is None
    assert not [w for w in caught if issubclass(w.category, CoverageCeilingWarning)]
    unchecked = [str(w.message) for w in caught if issubclass(w.category, UncheckedGeneratorWarning)]
    assert unchecked and "no generator record" in unchecked[0]


def test_the_report_keeps_the_record_when_it_refits_the_other_methods() -> None:
    import numpy as np

    obs = [PoolObservation(np.array([0.9, 0.5, 0.2]), (0,)) for _ in range(5)]
    summary = answer_set_summary(_calibration(RECORD), obs)
    assert summary.methods["bonferroni"]["guaranteed"] is True
    assert summary.methods["pac"]["guaranteed"] is True  # refitted with the same record
    blind = answer_set_summary(replace(_calibration(RECORD), generator_=None), obs)
    assert not any(m.get("guaranteed") for m in blind.methods.values())
