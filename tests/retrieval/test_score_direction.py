"""retrieval/score_direction.py: the direction of a store's raw scores, read from best-first results."""

from __future__ import annotations

import pytest

from conformal_rag_plugins.retrieval.score_direction import higher_is_better, runs_against, score_direction


@pytest.mark.parametrize(
    ("scores", "kind"),
    [
        ([0.9, 0.7, 0.7, 0.1], "similarity"),
        ([0.1, 0.2, 0.2, 3.0], "distance"),
        ([0.5, 0.9, 0.1], None),  # both ways: no order
        ([0.4, 0.4], None),  # one distinct score
        ([0.4], None),
        ([], None),
    ],
)
def test_direction_of_best_first_scores(scores, kind):
    assert score_direction(scores) == kind


def test_a_list_against_its_direction_is_found():
    assert not runs_against([0.9, 0.5, 0.5], "similarity")
    assert runs_against([0.5, 0.9], "similarity")
    assert not runs_against([0.1, 0.5], "distance")
    assert runs_against([0.5, 0.1], "distance")


def test_distances_are_negated_so_higher_is_better():
    assert [higher_is_better(s, "distance") for s in (0.1, 0.4)] == [-0.1, -0.4]
    assert [higher_is_better(s, "similarity") for s in (0.9, 0.4)] == [0.9, 0.4]
