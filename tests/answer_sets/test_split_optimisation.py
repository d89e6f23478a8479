"""The split of alpha is judged at the calibration's size, not the optimisation split's.

A rule built on the 24 optimisation questions at alpha = 0.1 can never be flagged (the flag rule needs
18 questions per stage at alpha_stage = 0.05, in fact 38), so every split scored the penalty and BO
returned the equal split, saying no split is feasible. The calibration the split is for has 200
questions, where the same scores give flagged rules: judged at that size (:func:`at_size`), BO finds
feasible splits, and it still says infeasible when the calibration is as small as the optimisation split.
"""

from __future__ import annotations

import warnings

import numpy as np

from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.answer_sets.split_optimisation import SplitQuestion, at_size, choose_split
from conformal_rag_plugins.core.clustering import AnswerCluster
from conformal_rag_plugins.core.errors import CoverageCeilingWarning


def _questions(n: int = 24, seed: int = 3) -> list[SplitQuestion]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        nonconformity = np.sort(rng.uniform(0.0, 1.0, 4))
        gold = int(rng.integers(0, 2))
        clusters = {
            f"c{j}": [AnswerCluster(f"a{i}" if j == gold else f"x{j}", (f"a{i}",), float(rng.uniform(0.3, 1.0)))]
            for j in range(4)
        }
        out.append(
            SplitQuestion(
                id=f"q{i}",
                question=f"Q {i}?",
                answers=(f"a{i}",),
                chunk_ids=tuple(clusters),
                chunk_nonconformity=nonconformity,
                r_ret=float(nonconformity[gold]),
                r_gen=-clusters[f"c{gold}"][0].confidence,
                clusters=clusters,
            )
        )
    return out


def _choose(n_calibration: int | None) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoverageCeilingWarning)
        got = choose_split(
            _questions(), 0.1, split=SplitOptions(optimise=True, bo_calls=5), penalty=16.0, n_calibration=n_calibration
        )
    got["warned"] = any(issubclass(w.category, CoverageCeilingWarning) for w in caught)
    return got


def test_at_size_keeps_the_law_and_the_miss_share() -> None:
    scores = [0.3, 0.1, float("inf"), 0.2]
    assert at_size(scores, 8) == [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, float("inf"), float("inf")]
    assert at_size(scores, 4) == sorted(scores)
    assert sum(np.isinf(at_size(scores, 1000))) == 250


def test_a_split_for_a_large_calibration_is_judged_at_its_size() -> None:
    large = _choose(200)
    assert large["feasible"] and not large["warned"], large
    assert large["n_calibration_judged"] == 200 and large["n_optimisation"] == 24
    assert large["bo_objective"] < 16.0  # a flagged rule's sets, not the penalty


def test_negative_control_judged_at_the_optimisation_size_no_split_is_feasible() -> None:
    small = _choose(None)
    assert not small["feasible"] and small["warned"], small
    assert small["n_calibration_judged"] == 24
