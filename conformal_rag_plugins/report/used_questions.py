"""The questions a saved calibration used, which a held-out check must leave out.

A retrieval calibration used its own questions (``question_ids_``) and, when an optimisation split
tuned its host or chose its score family, those too (``selection_["optimisation_question_ids"]``).
An answer-set calibration used, besides those of its retrieval stage, the questions whose
optimisation chose its split of alpha (``optimisation_["optimisation_question_ids"]``) and its
pilot's (``optimisation_["pilot"]["question_ids"]``), which decided whether to calibrate at all.
``conformal-rag report`` and ``ConformalRetriever.evaluate`` both leave out :attr:`UsedQuestions.all`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class UsedQuestions:
    """Digests of the questions a calibration used, by what they were used for.

    Attributes
    ----------
    calibration : frozenset of str
        The questions the thresholds were computed on (``question_ids_``).
    host_tuning : frozenset of str
        The optimisation split that tuned the retrieval host or chose its score family.
    answer_set_choice : frozenset of str
        An answer-set calibration's optimisation split (the split of alpha) and pilot questions.
    unrecorded : int
        Questions the calibration says it used without recording which (files saved before the
        record): they cannot be left out.

    Examples
    --------
    >>> used = UsedQuestions(frozenset({"a"}), frozenset({"b"}), frozenset({"c", "a"}), 0)
    >>> sorted(used.all), sorted(used.answer_set_only)
    (['a', 'b', 'c'], ['c'])
    """

    calibration: frozenset[str]
    host_tuning: frozenset[str]
    answer_set_choice: frozenset[str]
    unrecorded: int

    @property
    def all(self) -> frozenset[str]:
        """Every question the calibration used: none of them is held out."""
        return self.calibration | self.host_tuning | self.answer_set_choice

    @property
    def answer_set_only(self) -> frozenset[str]:
        """The answer-set choice questions that are neither calibration nor host-tuning ones."""
        return self.answer_set_choice - self.calibration - self.host_tuning


def _ids(record: dict[str, Any], key: str) -> frozenset[str]:
    return frozenset(str(q) for q in record.get(key) or ())


def _unrecorded(record: dict[str, Any], ids_key: str, count_key: str) -> int:
    """``record[count_key]`` when the record counts questions it does not name (``ids_key`` absent)."""
    return 0 if ids_key in record else int(record.get(count_key) or 0)


def used_questions(calibration: Any) -> UsedQuestions:
    """The questions ``calibration`` used (a ``RetrievalCalibration`` or an ``AnswerSetCalibration``).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> retrieval = SimpleNamespace(question_ids_=("a", "b"), selection_={"rule": "auto", "n_optimisation": 3})
    >>> used_questions(retrieval).unrecorded
    3
    >>> answer_sets = SimpleNamespace(retrieval_=SimpleNamespace(question_ids_=("a",), selection_={}),
    ...     optimisation_={"n_optimisation": 1, "optimisation_question_ids": ["o"], "pilot": {"question_ids": ["p"]}})
    >>> sorted(used_questions(answer_sets).all)
    ['a', 'o', 'p']
    """
    answer_sets = calibration if hasattr(calibration, "retrieval_") else None
    retrieval = calibration.retrieval_ if answer_sets is not None else calibration
    selection = dict(retrieval.selection_ or {})
    choice: frozenset[str] = frozenset()
    unrecorded = _unrecorded(selection, "optimisation_question_ids", "n_optimisation")
    if answer_sets is not None:
        optimisation = dict(answer_sets.optimisation_ or {})
        pilot = dict(optimisation.get("pilot") or {})
        choice = _ids(optimisation, "optimisation_question_ids") | _ids(pilot, "question_ids")
        unrecorded += _unrecorded(optimisation, "optimisation_question_ids", "n_optimisation")
        unrecorded += _unrecorded(pilot, "question_ids", "n_questions")
    return UsedQuestions(
        calibration=frozenset(retrieval.question_ids_),
        host_tuning=_ids(selection, "optimisation_question_ids"),
        answer_set_choice=choice,
        unrecorded=unrecorded,
    )
