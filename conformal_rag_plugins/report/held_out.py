"""The report's verdict from Python: a served retriever measured on held-out questions.

What ``conformal-rag report`` prints ("held-out coverage 0.907 at target 0.9, inside the 95% band
[0.827, 0.963]: consistent with the guarantee"), for the sets a retriever actually serves. Both
adapters' ``ConformalRetriever.evaluate`` delegate here; they supply only how to put gold ids on
their store (the host reader's ``prepare_gold``, the one gold-id rule) and how to ask one question.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import CalibrationError, GuaranteeCutWarning
from ..datasets.examples import CalibrationExample
from ..retrieval.gold_matching import gold_positions
from ..retrieval.pool_calibration import check_labelled
from ..retrieval.serving import serving_calibration
from .data import Verdict, _jsonable, calibrated_verdict
from .used_questions import used_questions

if TYPE_CHECKING:
    from ..answer_sets.calibration import AnswerSetCalibration
    from ..retrieval.calibration import RetrievalCalibration

#: One returned unit as an adapter reads it: ``(id, text, metadata["conformal_guaranteed"])``.
ServedItem = tuple[str | None, str, Any]


@dataclass(frozen=True)
class HeldOutReport:
    """A served retriever on held-out questions: coverage, set sizes, context and the report's verdict.

    Attributes
    ----------
    n_questions : int
        Held-out questions asked (the verdict's ``n_test``).
    n_excluded : int
        Questions given but left out: those the calibration was calibrated on
        (``calibration.question_ids_``), whose optimisation split tuned its host
        (``selection_["optimisation_question_ids"]``) and, for an answer-set calibration, those that
        chose its split of alpha or ran its pilot (``optimisation_``), as ``conformal-rag report``
        leaves them out.
    coverage : float
        Share of held-out questions with a gold chunk among the returned units.
    mean_set_size : float
        Units (nodes, documents, parents) returned per question.
    mean_context_tokens : float
        MiniLM word pieces of the returned texts per question.
    share_guaranteed : float
        Share of questions whose set was served flagged guaranteed (not cut by ``max_k``/``k``,
        no ``+inf`` threshold, no fallback group).
    verdict : Verdict
        ``status`` (``"inside"``, ``"below"``, ``"above"``, ``"no_band"``), ``text``, ``coverage``,
        ``target`` and the 95% band, computed as ``conformal-rag report`` does at the calibrated level.
    """

    n_questions: int
    n_excluded: int
    coverage: float
    mean_set_size: float
    mean_context_tokens: float
    share_guaranteed: float
    verdict: Verdict

    def summary(self) -> str:
        """One line: the verdict, then the set size and context tokens.

        Examples
        --------
        >>> v = Verdict("inside", "held-out coverage 0.910 at target 0.9, inside the 95% band [0.827, 0.963]: "
        ...             "consistent with the guarantee", True, 0.91, 0.9, 0.827, 0.963, 100, 200)
        >>> HeldOutReport(100, 200, 0.91, 2.5, 687.0, 1.0, v).summary()  # doctest: +ELLIPSIS
        'held-out coverage 0.910 ... consistent with the guarantee; 2.50 units, 687 tokens per question (100 ...'
        """
        return (
            f"{self.verdict.text}; {self.mean_set_size:.2f} units, {self.mean_context_tokens:.0f} tokens per question "
            f"({self.n_questions} held-out questions, {self.n_excluded} left out; "
            f"{self.share_guaranteed:.0%} of sets flagged guaranteed)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the verdict as :meth:`Verdict.to_dict`)."""
        return {**_jsonable(asdict(self)), "verdict": self.verdict.to_dict()}


def _held_out(examples: list[CalibrationExample], calibration: Any) -> list[CalibrationExample]:
    """The examples the calibration did not use (:func:`~.used_questions.used_questions`; same order)."""
    stage = serving_calibration(calibration)
    if not stage.question_ids_:
        raise CalibrationError(
            "The calibration does not record which questions it was calibrated on (question_ids is empty: made "
            "from bare pools, or edited), so they cannot be left out of the held-out ones. Calibrate on labelled "
            "examples (calibrate_retriever, from_documents or conformal-rag calibrate), which records them."
        )
    used = used_questions(calibration)
    if used.unrecorded:
        warnings.warn(
            f"This calibration predates the record of the {used.unrecorded} questions that tuned the host (or chose "
            "the answer-set split, or ran its pilot), so they may be among the held-out ones: re-calibrate to record "
            "them.",
            UserWarning,
            stacklevel=4,
        )
    held = [ex for ex in examples if ex.digest not in used.all]
    if not held:
        raise CalibrationError(
            f"No held-out question: all {len(examples)} questions were used to calibrate, to tune the host, or to "
            "choose the answer-set split (or its pilot)."
        )
    return held


def held_out_report(
    examples: Iterable[CalibrationExample],
    calibration: RetrievalCalibration | AnswerSetCalibration,
    *,
    prepare_gold: Callable[[list[CalibrationExample]], list[CalibrationExample]],
    serve: Callable[[str], Sequence[ServedItem]],
    count_tokens: Callable[[str], int],
    progress: bool = False,
) -> HeldOutReport:
    """Ask ``serve`` every held-out question of ``examples`` and give the report's verdict on its sets.

    Parameters
    ----------
    examples : iterable of CalibrationExample
        Labelled questions; those ``calibration`` used are left out (see :class:`HeldOutReport`).
    calibration : RetrievalCalibration or AnswerSetCalibration
        The calibration the retriever was given: the sets are served with it (an answer-set
        calibration's retrieval stage), and every question it used is left out.
    prepare_gold : callable
        The host reader's ``prepare_gold``: gold ids onto the served units (the one gold-id rule).
    serve : callable
        One question -> the served set as :data:`ServedItem` triples.
    count_tokens : callable
        Context tokens of one returned text.
    progress : bool, default False
        A progress bar over the questions.

    Raises
    ------
    CalibrationError
        A calibration without recorded questions, no held-out question, an unlabelled question, or a
        gold id that is neither a chunk id nor a document id of the store.
    """
    from ..runtime.progress import progress_bar

    examples = list(examples)
    held = _held_out(examples, calibration)
    check_labelled(held)
    held = prepare_gold(held)
    tokens_of: dict[str, int] = {}
    covered, sizes, tokens, flagged = [], [], [], []
    cut: list[str] = []
    others: dict[tuple[type[Warning], str], Warning] = {}
    for ex in progress_bar(held, enabled=progress, desc="evaluating", unit="q"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            items = list(serve(ex.question))
        reasons = [str(w.message) for w in caught if issubclass(w.category, GuaranteeCutWarning)]
        for w in caught:
            if not issubclass(w.category, GuaranteeCutWarning):
                others.setdefault((w.category, str(w.message)), w.message)  # type: ignore[arg-type]
        cut.extend(reasons[:1])
        ids = [i for i, _, _ in items]
        texts = [t for _, t, _ in items]
        covered.append(bool(gold_positions(ex, ids, texts)))
        sizes.append(len(items))
        for text in texts:
            if text not in tokens_of:
                tokens_of[text] = count_tokens(text)
        tokens.append(sum(tokens_of[t] for t in texts))
        flagged.append(not reasons and all(flag is True for _, _, flag in items))
    for (category, _), message in others.items():
        warnings.warn(message, category, stacklevel=3)
    if cut:
        warnings.warn(
            f"{len(cut)} of the {len(held)} held-out sets were served without the guarantee, e.g.: {cut[0]}",
            GuaranteeCutWarning,
            stacklevel=3,
        )
    coverage = float(np.mean(covered))
    return HeldOutReport(
        n_questions=len(held),
        n_excluded=len(examples) - len(held),
        coverage=coverage,
        mean_set_size=float(np.mean(sizes)),
        mean_context_tokens=float(np.mean(tokens)),
        share_guaranteed=float(np.mean(flagged)),
        verdict=calibrated_verdict(serving_calibration(calibration), coverage, len(held)),
    )


class HeldOutEvaluation:
    """Both adapters' ``ConformalRetriever.evaluate``, written once; the adapter gives :meth:`_held_out_parts`.

    An adapter keeps the calibration it was given in ``_given_calibration`` (it serves
    ``calibration``, an answer-set calibration's retrieval stage), so that the questions an answer-set
    calibration used beyond its retrieval stage (split optimisation, pilot) are left out too.
    """

    def _evaluated_calibration(self) -> Any:
        """The calibration the retriever was given, while it still serves it; else the one it serves."""
        served = self.calibration  # type: ignore[attr-defined]
        given = getattr(self, "_given_calibration", None)
        # ``calibration`` may have been replaced since: then the given one no longer describes the sets
        return given if given is not None and serving_calibration(given) == served else served

    def _held_out_parts(self) -> tuple[Callable[..., list[CalibrationExample]], Callable[[str], Any], Callable]:
        """The host reader's ``prepare_gold``, ``serve(question)`` (the served set as :data:`ServedItem`
        triples) and ``count_tokens`` (MiniLM word pieces)."""
        raise NotImplementedError

    def evaluate(self, examples: Sequence[CalibrationExample], *, progress: bool = False) -> HeldOutReport:
        """The verdict of ``conformal-rag report`` on held-out questions, for the sets this retriever serves.

        Every question of ``examples`` that the calibration did not use (neither calibrated on nor
        tuning the host; for an answer-set calibration, neither choosing its split of alpha nor in its
        pilot) is asked through the retriever (``retrieve`` / ``invoke``), as an app asks it
        (parents, ``k``, ``max_k`` and the group options apply). Its gold ids go through the one gold-id
        rule: chunk (node) ids, or document ids (moved onto the chunk holding an answer, else all the
        document's chunks).

        Parameters
        ----------
        examples : sequence of CalibrationExample
            Labelled questions; the calibration's own, its host-tuning ones and an answer-set
            calibration's split-choosing and pilot ones are left out.
        progress : bool, default False
            A progress bar over the questions.

        Returns
        -------
        HeldOutReport
            ``coverage``, ``mean_set_size``, ``mean_context_tokens`` (MiniLM word pieces),
            ``share_guaranteed``, ``n_questions``, ``n_excluded`` and ``verdict`` (status, text and
            the 95% band, as the command line computes them); ``summary()`` is one line.

        Raises
        ------
        CalibrationError
            A calibration that does not record its questions, no held-out question, an unlabelled
            question, or a gold id the store does not hold.

        Examples
        --------
        >>> retriever = ConformalRetriever.from_documents(docs, calibration_examples)  # doctest: +SKIP
        >>> print(retriever.evaluate(held_out_examples).summary())  # doctest: +SKIP
        held-out coverage 0.907 at target 0.9, inside the 95% band [0.827, 0.963]: consistent with the guarantee; ...
        """
        prepare_gold, serve, count = self._held_out_parts()
        calibration = self._evaluated_calibration()
        return held_out_report(
            examples, calibration, prepare_gold=prepare_gold, serve=serve, count_tokens=count, progress=progress
        )
