"""Answer-set metrics: coverage (ROUGE-1 / exact), TRAC's set sizes, abstentions vs hallucinations."""

from __future__ import annotations

import pytest

from conformal_rag_plugins.core.answer_metrics import (
    SetSizes,
    evaluate_answer_set,
    evaluate_answer_sets,
    set_abstains,
    set_covers,
    set_sizes,
)
from conformal_rag_plugins.core.clustering import cluster_answers, merge_clusters
from conformal_rag_plugins.core.errors import ConformalError


def test_coverage_by_rouge_and_by_exact_match():
    refs = ["Denmark"]
    assert set_covers(["Norway", "the Kingdom of Denmark"], refs)  # ROUGE-1 F1 = 0.5 > 0.3
    assert not set_covers(["Norway", "the Kingdom of Denmark"], refs, match="exact")
    assert set_covers(["Norway", "denmark."], refs, match="exact")
    assert not set_covers(["Norway", "Sweden"], refs)
    assert not set_covers([], refs)
    # the 0.3 threshold is configurable: ROUGE-1 F1 of a 6-word answer with one matching word = 2/7
    long = "one two three four five Denmark"
    assert not set_covers([long], refs)
    assert set_covers([long], refs, threshold=0.25)


def test_coverage_counts_every_member_of_a_cluster():
    # the cluster's representative is "Kingdom of Denmark"; a member matches exactly
    cl = cluster_answers(["Kingdom of Denmark", "Denmark"], method="rouge1", tau=0.5)
    assert len(cl) == 1
    assert set_covers(cl, ["Denmark"], match="exact")


def test_abstention_is_not_coverage_of_an_answerable_question():
    assert not set_covers(["I don't know"], ["Unknown Soldier"])
    assert set_covers(["I don't know"], ["no answer"])  # unanswerable question


def test_set_sizes_ans_ext_rou_sem():
    answers = ["Paris", "paris", "The Paris.", "Eiffel Tower", "Eiffel Tower, Paris", "Lyon", "Lyon"]
    sizes = set_sizes(answers)
    assert sizes == SetSizes(ans=7, ext=4, rou=3, sem=3)
    clusters = cluster_answers(answers, method="exact")
    assert set_sizes(clusters) == SetSizes(ans=7, ext=4, rou=3, sem=4)
    assert set_sizes([]) == SetSizes(0, 0, 0, 0)
    # stricter ROUGE de-duplication keeps more answers apart
    assert set_sizes(answers, rouge_tau=0.9).rou == 4
    # a pluggable equivalence for Sem on raw strings
    assert set_sizes(answers, method=lambda a, b: True).sem == 1


def test_sizes_of_a_merged_end_to_end_set():
    c1 = cluster_answers(["Paris", "Paris", "Lyon"], method="exact", chunk_id="c1")
    c2 = cluster_answers(["paris", "I don't know", "Nice"], method="exact", chunk_id="c2")
    merged = merge_clusters({"c1": c1, "c2": c2}, method="exact")
    assert set_sizes(merged) == SetSizes(ans=6, ext=4, rou=4, sem=4)


def test_abstention_detection_on_sets():
    assert set_abstains([])
    assert set_abstains(["I don't know", "No answer."])
    assert set_abstains(cluster_answers(["I don't know", "unknown"]))
    assert not set_abstains(["I don't know", "Paris"])
    assert not set_abstains(cluster_answers(["I don't know", "Paris"]))


def test_abstention_and_hallucination_are_separate():
    refs = ["Paris"]
    correct = evaluate_answer_set(["Paris", "Lyon"], refs)
    assert (correct.covered, correct.abstains, correct.hallucinates) == (True, False, False)
    wrong = evaluate_answer_set(["Lyon", "I don't know"], refs)
    assert (wrong.covered, wrong.abstains, wrong.hallucinates) == (False, False, True)
    idk = evaluate_answer_set(["I don't know"], refs)
    assert (idk.covered, idk.abstains, idk.hallucinates) == (False, True, False)
    empty = evaluate_answer_set([], refs)
    assert (empty.covered, empty.abstains, empty.hallucinates) == (False, True, False)


def test_report_averages():
    sets = [
        ["Paris", "Lyon"],  # covered (ROUGE and exact)
        ["in Paris"],  # covered by ROUGE only
        ["I don't know"],  # abstention
        ["Rome", "Milan", "rome"],  # hallucination
        [],  # abstention (empty set)
    ]
    refs = [["Paris"], ["Paris"], ["Oslo"], ["Bern"], ["Oslo"]]
    r = evaluate_answer_sets(sets, refs)
    assert r.n == 5
    assert r.coverage == pytest.approx(2 / 5)
    assert r.coverage_exact == pytest.approx(1 / 5)
    assert r.abstention_rate == pytest.approx(2 / 5)
    assert r.hallucination_rate == pytest.approx(1 / 5)
    assert r.coverage + r.abstention_rate + r.hallucination_rate == pytest.approx(1.0)
    assert r.ans == pytest.approx((2 + 1 + 1 + 3 + 0) / 5)
    assert r.ext == pytest.approx((2 + 1 + 1 + 2 + 0) / 5)
    assert set(r.as_dict()) >= {"coverage", "ans", "ext", "rou", "sem", "abstention_rate", "hallucination_rate"}


def test_report_input_errors():
    with pytest.raises(ConformalError):
        evaluate_answer_sets([["Paris"]], [["Paris"], ["Rome"]])
    with pytest.raises(ConformalError):
        evaluate_answer_sets([], [])
    with pytest.raises(ConformalError):
        set_sizes([1, 2])  # type: ignore[list-item]
