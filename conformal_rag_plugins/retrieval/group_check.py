"""Whether a query-time ``group_by`` function is the one a per-group calibration was made with.

A per-group threshold covers the questions its group held at calibration. A query-time function
that puts questions in other groups serves thresholds calibrated for other questions, and its
name says nothing about that. A calibration grouped by a function therefore records its questions
(``group_questions_``, aligned with ``group_labels_``), and a drop-in built with ``group_by``
reruns the function on them: a different group is refused, and when the questions are not
recorded (a metadata key, observed pools, an older file) the sets are served but not guaranteed.

Examples
--------
>>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
>>> from conformal_rag_plugins.retrieval.groups import with_groups
>>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
>>> cal = RetrievalCalibration(0.9, 0.1, "split", "relative", 5, 20, 0, tuple(i / 20 for i in range(20)), fp)
>>> tenant = lambda q: q.split(":")[0]
>>> cal = with_groups(cal, ("a",) * 20, tenant)
>>> unchecked_group_by(cal, tenant)[:47]
'The query-time group_by function is not checked'
>>> checked = replace(cal, group_questions_=tuple(f"a: question {i}?" for i in range(20)))
>>> check_group_by(checked, tenant), unchecked_group_by(checked, tenant)
(None, '')
>>> check_group_by(checked, lambda q: "b")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.ConformalError: group_by is not the function ... 20 of 20 calibration questions ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..core.errors import ConformalError
from ..core.mondrian import check_group_label
from ..core.selection import SetDecision
from ..datasets.examples import CalibrationExample, digest_of

C = TypeVar("C")


def with_group_questions(cal: C, examples: Sequence[CalibrationExample], group_by: Any) -> C:
    """``cal`` recording its questions' texts when it was grouped by the function ``group_by`` (else ``cal``).

    The texts are matched to ``cal.question_ids_`` by digest; if one is missing nothing is recorded.
    """
    labels, ids = getattr(cal, "group_labels_", ()), getattr(cal, "question_ids_", ())
    if group_by is None or isinstance(group_by, str) or not labels or len(ids) != len(labels):
        return cal
    by_digest = {ex.digest: ex for ex in examples}
    if not all(q in by_digest for q in ids):
        return cal
    return replace(  # type: ignore[type-var]
        cal,
        group_questions_=tuple(by_digest[q].question for q in ids),
        group_example_ids_=tuple(by_digest[q].id for q in ids),
    )


def group_question_problems(
    questions: Sequence[str], example_ids: Sequence[str | None], question_ids: Sequence[str]
) -> list[str]:
    """Recorded group questions that are not the calibration questions ``question_ids`` digest.

    Each question, with its example id (``example_ids``; empty: files that record none, questions without
    ids), must give its calibration question's digest: replaced questions would let a wrong ``group_by``
    pass :func:`check_group_by`.

    Examples
    --------
    >>> ids = [digest_of("a: one?", "q1"), digest_of("b: two?")]
    >>> group_question_problems(["a: one?", "b: two?"], ["q1", None], ids)
    []
    >>> group_question_problems(["b: one?", "b: two?"], ["q1", None], ids)[0][:60]
    'group_questions: 1 of 2 do not give the calibration question'
    """
    if not questions:  # nothing recorded (or removed): a query-time group_by is then served unchecked, not guaranteed
        return []
    if example_ids and len(example_ids) != len(questions):
        return [f"{len(example_ids)} group_example_ids for {len(questions)} group_questions"]
    if len(question_ids) != len(questions):
        return [f"{len(questions)} group_questions for {len(question_ids)} question_ids"]
    keys = example_ids or (None,) * len(questions)
    wrong = [i for i, (q, k, d) in enumerate(zip(questions, keys, question_ids, strict=True)) if digest_of(q, k) != d]
    if not wrong:
        return []
    return [
        f"group_questions: {len(wrong)} of {len(questions)} do not give the calibration question digest recorded in "
        f"question_ids (question {wrong[0]}: {questions[wrong[0]][:60]!r}); they were replaced, and a query-time "
        "group_by would be checked against other questions. Re-run the calibration"
    ]


def unchecked_group_by(cal: Any, group_by: Callable[[str], Any] | None) -> str:
    """Why a query-time ``group_by`` cannot be checked against ``cal`` (``""``: it can, see :func:`check_group_by`)."""
    if group_by is None or not getattr(cal, "group_labels_", ()) or getattr(cal, "group_questions_", ()):
        return ""
    how = getattr(cal, "group_by_", None) or "an unknown rule"
    return (
        f"The query-time group_by function is not checked against the calibration, which grouped by {how!r} "
        "and does not record its questions (a metadata key, observed pools, or a file saved by an older "
        "version): the group it gives a query may not be the one its threshold was calibrated for, so the set "
        "is not guaranteed. Pass group=..., or calibrate with group_by=<this function>."
    )


def check_group_by(cal: Any, group_by: Callable[[str], Any] | None) -> None:
    """Refuse a ``group_by`` that puts a recorded calibration question in another group than the calibration did.

    Reruns ``group_by`` on ``cal.group_questions_`` (nothing to do when they are not recorded).

    Raises
    ------
    ConformalError
        Naming how many questions differ and the first one, or the question ``group_by`` raised on.
    """
    questions = getattr(cal, "group_questions_", ())
    if group_by is None or not questions:
        return
    wrong = []
    for question, want in zip(questions, cal.group_labels_, strict=True):
        where = f" for the calibration question {question!r}"
        try:
            label = group_by(question)
        except Exception as exc:  # a user's function: name the question and keep the cause
            raise ConformalError(f"group_by raised {type(exc).__name__}: {exc}{where}.") from exc
        got = check_group_label(label, where)
        if got != want:
            wrong.append((question, got, want))
    if wrong:
        question, got, want = wrong[0]
        raise ConformalError(
            f"group_by is not the function this calibration was grouped with ({cal.group_by_!r}): it puts "
            f"{len(wrong)} of {len(questions)} calibration questions in another group, e.g. {question!r} in "
            f"{got!r} instead of {want!r}. Each group's threshold holds for the questions it was calibrated on: "
            "pass the calibration's function, or re-calibrate with this one."
        )


def mark_unchecked_group_by(decision: SetDecision, problem: str) -> SetDecision:
    """``decision`` marked not guaranteed for ``problem`` (:func:`unchecked_group_by`; ``""``: unchanged).

    >>> d = SetDecision((0,), 1, True, "")
    >>> mark_unchecked_group_by(d, "unchecked").guaranteed, mark_unchecked_group_by(d, "") is d
    (False, True)
    """
    if not problem:
        return decision
    return replace(decision, guaranteed=False, reason=" ".join(filter(None, (problem, decision.reason))))
