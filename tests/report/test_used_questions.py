"""The questions a calibration used, and so left out of every held-out check (issue 41, section 5).

An answer-set calibration's split-choosing (Bayesian optimisation) and pilot questions were counted
as held out by ``ConformalRetriever.evaluate``: 12 of 12 in the review's case. Framework-free here;
``test_held_out_answer_sets.py`` asks both frameworks' ``evaluate``.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, StageProvenance
from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.report.held_out import held_out_report
from conformal_rag_plugins.report.used_questions import used_questions
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
N = 40


def _examples(prefix: str, n: int) -> list[CalibrationExample]:
    return [CalibrationExample(f"{prefix} {i}?", gold_ids=("c1",), answers=("a",)) for i in range(n)]


CAL, SPLIT, PILOT, HELD = _examples("cal", N), _examples("split", 8), _examples("pilot", 4), _examples("held", 5)


def _answer_sets(optimisation: dict) -> AnswerSetCalibration:
    scores = tuple(i / N for i in range(N))
    ids = tuple(ex.digest for ex in CAL)
    retrieval = RetrievalCalibration(1.0, 0.1, "split", "relative", 5, N, 0, scores, FP, question_ids_=ids)
    return AnswerSetCalibration.from_stages(
        retrieval,
        [-1.0] * N,
        alpha=0.2,
        n_samples=4,
        model="fake",
        clustering={"method": "exact"},
        provenance=StageProvenance(question_ids=ids, optimisation=optimisation),
    )


RECORDED = {
    "n_optimisation": len(SPLIT),
    "optimisation_question_ids": [ex.digest for ex in SPLIT],
    "pilot": {"n_questions": len(PILOT), "n_hits": 4, "question_ids": [ex.digest for ex in PILOT]},
}


def test_an_answer_set_calibration_names_its_split_and_pilot_questions() -> None:
    used = used_questions(_answer_sets(RECORDED))
    assert used.calibration == {ex.digest for ex in CAL}
    assert used.answer_set_choice == used.answer_set_only == {ex.digest for ex in SPLIT + PILOT}
    assert used.host_tuning == frozenset() and used.unrecorded == 0
    # a retrieval calibration alone: only its own questions (and its host-tuning ones)
    stage = _answer_sets(RECORDED).retrieval_
    assert used_questions(stage).all == {ex.digest for ex in CAL}


def test_held_out_report_leaves_out_the_split_and_pilot_questions() -> None:
    """Fails before the fix: 12 split/pilot questions were asked as held out (17 asked, 45 excluded -> 40)."""
    cal = _answer_sets(RECORDED)
    asked: list[str] = []

    def serve(question: str) -> list[tuple]:
        asked.append(question)
        return [("c1", "t", True)]

    report = held_out_report(CAL + SPLIT + PILOT + HELD, cal, prepare_gold=list, serve=serve, count_tokens=len)
    assert asked == [ex.question for ex in HELD]
    assert (report.n_questions, report.n_excluded) == (len(HELD), N + len(SPLIT) + len(PILOT))
    # the verdict is the served retrieval stage's, at alpha_retrieval
    assert report.verdict.target == pytest.approx(1 - cal.alpha_retrieval_)
    with pytest.raises(CalibrationError, match="No held-out question"):
        held_out_report(SPLIT + PILOT, cal, prepare_gold=list, serve=serve, count_tokens=len)


def test_an_older_answer_set_file_without_the_ids_warns() -> None:
    cal = _answer_sets({"n_optimisation": 8, "pilot": {"n_questions": 4, "n_hits": 4}})
    assert used_questions(cal).unrecorded == 12
    with pytest.warns(UserWarning, match="the 12 questions that tuned the host"):
        report = held_out_report(HELD, cal, prepare_gold=list, serve=lambda q: [("c1", "t", True)], count_tokens=len)
    assert report.n_questions == len(HELD)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recorded: nothing to warn about
        held_out_report(HELD, replace(cal, optimisation_=RECORDED), prepare_gold=list,
                        serve=lambda q: [("c1", "t", True)], count_tokens=len)  # fmt: skip


def test_evaluate_reads_the_given_calibration_while_it_is_the_one_served() -> None:
    """The adapters' ``evaluate``: the answer-set calibration given, unless ``calibration`` was replaced since."""
    from conformal_rag_plugins.report.held_out import HeldOutEvaluation
    from conformal_rag_plugins.retrieval.serving import serving_calibration

    class DropIn(HeldOutEvaluation):
        def __init__(self, given: AnswerSetCalibration) -> None:
            self._given_calibration = given
            self.calibration = serving_calibration(given)

        def _held_out_parts(self):
            return list, lambda question: [("c1", "t", True)], len

    drop_in = DropIn(_answer_sets(RECORDED))
    everything = CAL + SPLIT + PILOT + HELD
    assert drop_in.evaluate(everything).n_questions == len(HELD)
    drop_in.calibration = replace(drop_in.calibration, alpha_=0.15)  # another calibration served since
    assert drop_in.evaluate(everything).n_questions == len(HELD) + len(SPLIT) + len(PILOT)
