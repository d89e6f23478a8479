"""The monitor's reference population on real data: every question, as ``conformal-rag monitor`` takes it.

A live stream cannot be filtered on a label, so the stream holds answerable and unanswerable
questions alike. ``conformal-rag monitor`` builds its reference from every question of the qa
file (:func:`~conformal_rag_plugins.commands.monitor_questions.reference_questions`); before issue 21
it took the answerable ones only. The top-1 score of the LlamaIndex dense host (Chroma + MiniLM)
is computed once for each of the 1,407 bundled SQuAD 2.0 questions (702 unanswerable); random
orders are then replayed through the library's :class:`ConformalMonitor`.

Each order draws a stream of 300 questions from all of them and a reference of 300 others:
- from the questions ``reference_questions`` returns (the same population as the stream, no
  drift): the share of orders with an alarm is Binomial(ORDERS, p) with p <= delta, and the check
  fails when the count exceeds c with P(Binomial(ORDERS, delta) > c) <= 1e-3;
- negative control, the old rule: from the answerable questions only. The stream is then not
  exchangeable with the reference (unanswerable questions score lower), and the check fails
  unless the alarm fires in more than twice c orders.

Measured (seed 2121, delta = 0.05, c = 21): 3 of 200 orders alarm with every question as the
reference, 68 of 200 with the answerable ones only (84 with a stream of 600).
"""

from __future__ import annotations

import numpy as np
import pytest

from conformal_rag_plugins.commands.monitor_questions import reference_questions
from conformal_rag_plugins.core.binomial import binom_cdf
from conformal_rag_plugins.datasets.question_file import load_qa
from conformal_rag_plugins.local.data import bundled_corpus_paths
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

pytestmark = [pytest.mark.integration, pytest.mark.statistical]

ORDERS = 200
DELTA = 0.05
N_REFERENCE = 300
N_STREAM = 300
SEED = 2121


def _limit(n: int, p: float, tail: float = 1e-3) -> int:
    return next(c for c in range(n + 1) if 1.0 - binom_cdf(c, n, p) <= tail)


@pytest.fixture(scope="module")
def top1(host_factory) -> dict[str, float]:
    """Question -> top-1 score of the LlamaIndex dense host, for every bundled question."""
    qa = bundled_corpus_paths()[0].with_name("qa.jsonl")
    fetch = host_factory("llamaindex", "dense").fetch
    return {q: float(fetch(q).scores[0]) for q in set(reference_questions(qa))}


def _calibration() -> RetrievalCalibration:
    """A stand-in calibration: the ``top1`` statistic does not use the threshold."""
    fp = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "all-MiniLM-L6-v2", 384, "cosine", "dense")
    scores = tuple(i / 10 for i in range(1, 10))
    return RetrievalCalibration(scores[-1], 0.1, "split", "similarity", 50, 9, 0, scores, fp)


def _alarms(reference: list[float], stream: list[float], seed: int) -> bool:
    monitor = ConformalMonitor(_calibration(), reference=reference, statistic="top1", delta=DELTA, seed=seed)
    return any(monitor.observe_statistic(value).alarm for value in stream)  # stops at the first alarm


def _count(top1: dict[str, float], population: list[str]) -> int:
    """Orders with an alarm: a stream from every question, a reference from the rest of ``population``."""
    qa = bundled_corpus_paths()[0].with_name("qa.jsonl")
    everything = [q.question for q in load_qa(qa)]
    rng = np.random.default_rng(SEED)
    count = 0
    for r in range(ORDERS):
        stream = [everything[i] for i in rng.permutation(len(everything))[:N_STREAM]]
        asked = set(stream)
        left = [q for q in population if q not in asked]
        reference = [left[i] for i in rng.permutation(len(left))[:N_REFERENCE]]
        count += _alarms([top1[q] for q in reference], [top1[q] for q in stream], r)
    return count


def test_a_reference_of_every_question_keeps_false_alarms_at_delta(top1) -> None:
    qa = bundled_corpus_paths()[0].with_name("qa.jsonl")
    population = reference_questions(qa)
    answerable = {q.question for q in load_qa(qa, answerable_only=True)}
    assert len(population) == 1407 and len(answerable) < len(set(population))  # unanswerable ones are in
    count = _count(top1, population)
    assert count <= _limit(ORDERS, DELTA), f"{count}/{ORDERS} orders raised a false alarm at delta={DELTA}"


def test_negative_control_an_answerable_only_reference_alarms_without_drift(top1) -> None:
    qa = bundled_corpus_paths()[0].with_name("qa.jsonl")
    answerable = [q.question for q in load_qa(qa, answerable_only=True)]
    count = _count(top1, answerable)
    assert count > 2 * _limit(ORDERS, DELTA), f"the wrong rule alarmed in only {count}/{ORDERS} orders"
