"""calibrate_answer_sets, split=SplitOptions(optimise=True): BO on a disjoint optimisation split, on the real host."""

from __future__ import annotations

import pytest
from langchain_core.language_models import FakeListChatModel

from conformal_rag_plugins.answer_sets.options import SamplingOptions, SplitOptions

pytestmark = pytest.mark.integration


def test_bo_split_is_chosen_on_disjoint_questions(host_factory, squad_questions) -> None:
    from conformal_rag_plugins.langchain import calibrate_answer_sets

    host = host_factory("langchain", "hybrid").host
    llm = FakeListChatModel(responses=["France", "France", "Rollo", "I don't know", "10th century"])
    questions = squad_questions[:40]
    cal = calibrate_answer_sets(
        host,
        llm,
        questions,
        confidence_level=0.5,
        # pilot=None: the 28 questions after the optimisation split all calibrate (the pilot has its own tests)
        sampling=SamplingOptions(n_samples=5, progress=False, pilot=None),
        split=SplitOptions(optimise=True, bo_calls=6),
    )
    info = cal.optimisation_
    assert info["n_optimisation"] == 12
    # final thresholds use only the other 28 questions, in both stages
    assert cal.retrieval_.n_calibration_ == 28 and len(cal.generation_scores_) == 28
    # BO never does worse than the equal split on the data it optimised on
    assert info["bo_objective"] <= info["equal_split_objective"]
    assert 0 < cal.alpha_retrieval_ < cal.alpha_ and cal.alpha_retrieval_ == pytest.approx(info["alpha_retrieval"])
    assert cal.alpha_retrieval_ + cal.alpha_generation_ == pytest.approx(0.5)
