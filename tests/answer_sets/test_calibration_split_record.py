"""The questions that chose an answer-set calibration's split of alpha are recorded, and ``report`` leaves them out.

Issue 33, item 3: ``SplitOptions(optimise=True)`` chose the split on a seeded optimisation split but
recorded no question ids, so ``conformal-rag report`` counted those questions as held out. They are
now recorded in ``optimisation_["optimisation_question_ids"]`` (as the retrieval side records
``selection_["optimisation_question_ids"]``), checked on load, and left out of every held-out figure.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/report/page.py

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.conformalizer import AnswerSetConformalizer
from conformal_rag_plugins.answer_sets.options import ClusteringOptions, SamplingOptions, SplitOptions
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.errors import CalibrationIntegrityError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.datasets.examples import CalibrationExample, save_examples
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool
from conformal_rag_plugins.storage.jsonio import with_checksum

M = 4
N_CALIBRATE, N_HELD_OUT = 80, 20  # 80 questions calibrate (24 choose the split, 56 calibrate), 20 are held out


def _questions(n: int) -> list[CalibrationExample]:
    return [
        CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=(f"ans{i}",), id=f"q{i}") for i in range(n)
    ]


def _host(factory, n: int):
    """Question i's gold chunk ``g{i}`` ranks by ``0.95 - 0.03 (i mod 13)`` among 3 distractors; M samples."""
    texts = {f"g{i}": f"gold {i}" for i in range(n)} | {f"d{j}": f"distractor {j}" for j in range(3)}

    def pool(question: str) -> CandidatePool:
        i = int(question.split()[1].rstrip("?"))
        ids = ["d0", "d1", "d2", f"g{i}"]
        return CandidatePool.from_unsorted(ids, [texts[c] for c in ids], [0.9, 0.8, 0.7, 0.95 - 0.03 * (i % 13)])

    async def sample(question: str, context: str) -> list[Sample]:
        i = int(question.split()[1].rstrip("?"))
        got = [f"ans{i}"] * (2 + i % 3) if context == f"gold {i}" else []
        return [Sample(t) for t in got + ["noise"] * (M - len(got))]

    identity = {"llm": {"class": "Fake", "name": "fake"}, "sampling": {"n_samples": M}}
    return factory(pool, texts.get, sample, pool_size=4, identity=identity), texts


@pytest.fixture
def optimised(fake_answer_host):
    """An answer-set calibration whose split was chosen by BO on 30% of the first 80 questions."""
    host, texts = _host(fake_answer_host, N_CALIBRATE + N_HELD_OUT)
    conformalizer = AnswerSetConformalizer(
        0.6,
        # pilot=None: every question counted below calibrates or chose the split
        sampling=SamplingOptions(n_samples=M, progress=False, pilot=None),
        split=SplitOptions(optimise=True, bo_calls=4),
        clustering=ClusteringOptions(method="exact", tau=None),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = conformalizer.conformalize(host, _questions(N_CALIBRATE))
    return cal, texts


def test_the_questions_that_chose_the_split_are_recorded_and_disjoint(optimised, tmp_path) -> None:
    cal, _ = optimised
    ids = cal.optimisation_["optimisation_question_ids"]
    digests = {ex.digest for ex in _questions(N_CALIBRATE)}
    assert len(ids) == len(set(ids)) == cal.optimisation_["n_optimisation"] == 24
    assert set(ids) <= digests and not set(ids) & set(cal.question_ids_)
    assert set(ids) | set(cal.question_ids_) == digests  # every question is either optimisation or calibration
    cal.save(tmp_path / "answers.json")
    assert AnswerSetCalibration.load(tmp_path / "answers.json").optimisation_["optimisation_question_ids"] == ids


def _edited(cal: AnswerSetCalibration, edit) -> dict:
    data = cal.to_dict()
    data.pop("checksum")
    edit(data)
    return with_checksum(data)


def test_a_file_without_the_record_still_loads(optimised) -> None:
    cal, _ = optimised
    old = _edited(cal, lambda d: d["optimisation"].pop("optimisation_question_ids"))
    assert "optimisation_question_ids" not in AnswerSetCalibration.from_dict(old).optimisation_


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["optimisation"]["optimisation_question_ids"].append(d["question_ids"][0]), "also a calibration"),
        (lambda d: d["optimisation"].update(optimisation_question_ids="q1"), "list of non-empty"),
        (lambda d: d["optimisation"]["optimisation_question_ids"].append("0" * 16), "ids for n_optimisation"),
        (lambda d: d["optimisation"]["optimisation_question_ids"].__setitem__(1, "x"), None),
    ],
)
def test_an_edited_record_is_refused(optimised, edit, message) -> None:
    cal, _ = optimised
    data = _edited(cal, edit)
    if message is None:  # another digest in place of one: not detectable, and harmless to the thresholds
        AnswerSetCalibration.from_dict(data)
        return
    with pytest.raises(CalibrationIntegrityError, match=message):
        AnswerSetCalibration.from_dict(data)


def test_report_leaves_the_split_choosing_questions_out_of_every_held_out_figure(
    optimised, tmp_path, monkeypatch
) -> None:
    """``run_report`` on the 100 questions: only the 20 never used are held out (before the fix: 44)."""
    from types import SimpleNamespace

    from conformal_rag_plugins.commands import report as report_cmd
    from conformal_rag_plugins.commands import report_host
    from conformal_rag_plugins.retrieval import pool_calibration

    cal, texts = optimised
    cal.save(tmp_path / "answers.json")
    questions = _questions(N_CALIBRATE + N_HELD_OUT)
    save_examples(questions, tmp_path / "qa.jsonl")
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in texts.items()))
    queried: list[str] = []

    def observe(examples, fetch, *, progress=True) -> list[PoolObservation]:  # the rebuilt host's pools
        queried.extend(ex.digest for ex in examples)
        return [PoolObservation(np.array([0.95, 0.9, 0.8, 0.7]), (0,), question_id=ex.digest) for ex in examples]

    monkeypatch.setattr(report_host, "host_spec", lambda c: ("llamaindex", "dense", None))
    monkeypatch.setattr(report_host, "rebuild_host", lambda *a, **k: SimpleNamespace(fetch=None))
    monkeypatch.setattr(pool_calibration, "collect_observations", observe)
    got = report_cmd.run_report(
        tmp_path / "answers.json",
        [tmp_path / "corpus.jsonl"],
        tmp_path / "qa.jsonl",
        tmp_path / "out",
        client=object(),
        progress=False,
    )
    never_used = {ex.digest for ex in questions[N_CALIBRATE:]}
    assert set(queried) == never_used and len(queried) == N_HELD_OUT
    assert got["n_heldout"] == got["coverage"]["n_test"] == N_HELD_OUT
    assert got["n_excluded_calibration_questions"] == cal.retrieval_.n_calibration_ == 56
    assert got["n_excluded_optimisation_questions"] == got["n_excluded_split_optimisation_questions"] == 24
    assert got["n_unrecorded_optimisation_questions"] == 0
    assert "24 split-choosing" in (tmp_path / "out" / "index.html").read_text()
    # a file saved before the record: the 24 cannot be left out, and the report says so
    old = AnswerSetCalibration.from_dict(_edited(cal, lambda d: d["optimisation"].pop("optimisation_question_ids")))
    old.save(tmp_path / "old.json")
    got = report_cmd.run_report(
        tmp_path / "old.json",
        [tmp_path / "corpus.jsonl"],
        tmp_path / "qa.jsonl",
        tmp_path / "old",
        client=object(),
        progress=False,
    )
    assert got["n_heldout"] == N_HELD_OUT + 24 and got["n_unrecorded_optimisation_questions"] == 24
