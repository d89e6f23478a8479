"""``CoverageCeilingWarning`` names the caller's line, not ``asyncio/events.py``.

The warning is raised inside the coroutine that ``run_sync`` runs (on this thread with
``asyncio.run``, or on a worker thread when a loop is already running), so a fixed
``stacklevel`` named the event loop. A small fake host drives ``AnswerSetConformalizer``, the body
of both frameworks' ``calibrate_answer_sets``: the generator answers only half the
questions, so a 70% target is out of reach and the warning must fire.
"""

from __future__ import annotations

import asyncio
import warnings

from conformal_rag_plugins.answer_sets.conformalizer import AnswerSetConformalizer
from conformal_rag_plugins.answer_sets.options import ClusteringOptions, SamplingOptions, SplitOptions
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.errors import CoverageCeilingWarning, InfiniteThresholdWarning
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.pool_calibration import (
    CandidatePool,
)
from conformal_rag_plugins.runtime.caller_warning import warn_at_caller
from conformal_rag_plugins.runtime.run_sync import run_sync

N_QUESTIONS = 40
EXAMPLES = [
    CalibrationExample(f"q{i}", gold_ids=(f"gold{i}",), answers=(f"answer{i}",), id=f"q{i}") for i in range(N_QUESTIONS)
]


def _pool(question: str) -> CandidatePool:
    i = int(question[1:])
    ids = [f"gold{i}", "other0", "other1"]
    return CandidatePool.from_unsorted(ids, [f"text of {c}" for c in ids], [0.9, 0.5, 0.4])


async def _sample(question: str, context: str) -> list[Sample]:
    i = int(question[1:])
    right = context == f"text of gold{i}" and i % 2 == 0  # the generator knows half the answers
    return [Sample(f"answer{i}" if right else "noise") for _ in range(4)]


def _calibrate(host_class) -> object:
    conformalizer = AnswerSetConformalizer(
        0.7,
        # pilot=None: the calibration's own warning, not the pilot's
        sampling=SamplingOptions(n_samples=4, progress=False, pilot=None),
        split=SplitOptions(bo_calls=4),
        clustering=ClusteringOptions(method="exact", tau=None),
    )
    return conformalizer.conformalize(host_class(_pool, "text of {}".format, _sample, pool_size=3), EXAMPLES)


def _ceiling_warnings(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", InfiniteThresholdWarning)  # the parent class; re-allow the subclass
        warnings.simplefilter("always", CoverageCeilingWarning)
        call()
    return [w for w in caught if issubclass(w.category, CoverageCeilingWarning)]


def test_coverage_ceiling_warning_names_the_callers_file(fake_answer_host) -> None:
    (w,) = _ceiling_warnings(lambda: _calibrate(fake_answer_host))
    assert "coverage ceiling 0.50" in str(w.message)
    assert w.filename == __file__, w.filename  # before: .../asyncio/events.py


def test_coverage_ceiling_warning_names_the_callers_file_inside_a_running_loop(fake_answer_host) -> None:
    """A notebook cell: ``run_sync`` runs the coroutine on a worker thread; the warning still names this file."""

    async def cell() -> list[warnings.WarningMessage]:
        return _ceiling_warnings(lambda: _calibrate(fake_answer_host))

    (w,) = asyncio.run(cell())
    assert w.filename == __file__, w.filename


def test_warn_at_caller_skips_library_frames_and_the_event_loop() -> None:
    async def library_like() -> None:  # this file is outside the package: it is the caller
        warn_at_caller("here", UserWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_sync(library_like())
    assert [w.filename for w in caught] == [__file__]
