"""Normalisation, abstention detection, greedy answer clustering, merging, and generation scores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformal_rag_plugins.core.clustering import AnswerCluster, cluster_answers, merge_clusters, rouge_f1
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.core.generation_scores import (
    answer_matches,
    coverage_ceiling,
    generation_score,
    generator_set,
)
from conformal_rag_plugins.core.normalize import is_abstention, normalize_answer

# ----------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Eiffel Tower.", "eiffel tower"),
        ("  an   apple,  a pear ", "apple pear"),
        ("Theatre", "theatre"),  # "the" only as a whole word
        ("“Quoted” — text…", "quoted text"),
        ("Zürich", "zürich"),
        ("", ""),
        (None, ""),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I don't know",
        "I don't know.",
        "i do not know",
        "Unknown",
        "No answer",
        "no answer.",
        "It cannot be determined",
        "Cannot be determined from the context",
        "Not mentioned",
        "The answer is not mentioned in the passage.",
        "The context does not say.",
        "",
        "   ",
        None,
        "N/A",
    ],
)
def test_abstentions_detected(text):
    assert is_abstention(text)


@pytest.mark.parametrize(
    "text",
    ["Paris", "Unknown Soldier", "None of the above was built", "The Known World", "no", "noanswer company"],
)
def test_real_answers_not_abstentions(text):
    assert not is_abstention(text)


def test_extra_abstention_phrases():
    assert not is_abstention("Keine Antwort")
    assert is_abstention("Keine Antwort!", extra_phrases=["keine antwort"])


# ----------------------------------------------------------------------------- clustering


def test_confidence_is_count_over_m_and_sorted():
    cl = cluster_answers(["Lyon", "Paris", "paris", "The Paris.", "Nice", "Lyon"], method="exact")
    assert [(c.representative, c.count) for c in cl] == [("Paris", 3), ("Lyon", 2), ("Nice", 1)]
    assert [c.confidence for c in cl] == [3 / 6, 2 / 6, 1 / 6]
    assert [c.score for c in cl] == [-0.5, -2 / 6, -1 / 6]
    assert sum(c.count for c in cl) == 6
    assert cl[0].members == ("Paris", "paris", "The Paris.")


def test_rouge_threshold_is_inclusive_and_configurable():
    # ROUGE-L F1("eiffel tower", "eiffel tower paris") = 0.8
    assert rouge_f1("Eiffel Tower", "Eiffel Tower, Paris", "rougeL") == pytest.approx(0.8)
    joined = cluster_answers(["Eiffel Tower", "Eiffel Tower, Paris"], method="rougeL", tau=0.8)
    split = cluster_answers(["Eiffel Tower", "Eiffel Tower, Paris"], method="rougeL", tau=0.81)
    assert [c.count for c in joined] == [2]
    assert [c.count for c in split] == [1, 1]
    # default tau (TRAQ) is 0.7
    assert len(cluster_answers(["Eiffel Tower", "Eiffel Tower, Paris"])) == 1


def test_rouge1_vs_rougeL_differ_on_word_order():
    a, b = "red green blue", "blue green red"
    assert rouge_f1(a, b, "rouge1") == pytest.approx(1.0)
    assert rouge_f1(a, b, "rougeL") == pytest.approx(1 / 3)
    assert len(cluster_answers([a, b], method="rouge1")) == 1
    assert len(cluster_answers([a, b], method="rougeL")) == 2


def test_joins_first_cluster_whose_representative_matches():
    # "green blue" matches representative "red green blue" (F1 0.8) and also "green blue pink"
    # (0.8), which did not join the first cluster (F1 0.667); it must join the first one.
    cl = cluster_answers(["red green blue", "cat dog", "green blue pink", "green blue"], method="rouge1", tau=0.75)
    first = next(c for c in cl if c.representative == "red green blue")
    assert first.members == ("red green blue", "green blue")
    assert [c.count for c in cl] == [2, 1, 1]
    # comparison is with the representative only, not with every member (greedy, not transitive)
    cl2 = cluster_answers(["red blue", "red blue cat dog", "cat dog"], method="rouge1", tau=0.6)
    assert [c.members for c in cl2] == [("red blue", "red blue cat dog"), ("cat dog",)]


def test_non_ascii_answers_cluster():
    cl = cluster_answers(["กรุงเทพ", "กรุงเทพ", "東京", "東京"])
    assert [c.count for c in cl] == [2, 2]
    assert rouge_f1("Zürich Hauptbahnhof", "Zürich") > 0.6


def test_abstentions_form_their_own_cluster():
    answers = ["I don't know", "Paris", None, "unknown", "", "I do not know Paris"]
    cl = cluster_answers(answers, method="rouge1", tau=0.1)  # even a very loose tau never merges with answers
    abst = [c for c in cl if c.abstention]
    assert len(abst) == 1
    assert abst[0].count == 5
    assert abst[0].members == ("I don't know", "", "unknown", "", "I do not know Paris")
    assert abst[0].confidence == pytest.approx(5 / 6)
    assert [c.representative for c in cl if not c.abstention] == ["Paris"]


def test_n_samples_denominator_and_errors():
    cl = cluster_answers(["A", "A", "B"], method="exact", n_samples=10)
    assert [c.confidence for c in cl] == [0.2, 0.1]
    with pytest.raises(ConformalError):
        cluster_answers(["A", "B"], n_samples=1)
    with pytest.raises(ConformalError):
        cluster_answers([], n_samples=None)
    with pytest.raises(ConformalError, match="Unknown clustering method"):
        cluster_answers(["A"], method="bleu")
    with pytest.raises(ConformalError, match="embed"):
        cluster_answers(["A", "B"], method="embedding")


def test_embedding_equivalence():
    vectors = {"Paris": [1.0, 0.0], "City of Paris": [0.95, 0.05], "Lyon": [0.0, 1.0], "Rome": [0.7, 0.7]}
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.array([vectors[t] for t in texts])

    cl = cluster_answers(["Paris", "City of Paris", "Lyon", "Rome"], method="embedding", tau=0.95, embed=embed)
    assert [c.members for c in cl] == [("Paris", "City of Paris"), ("Lyon",), ("Rome",)]
    assert len(calls) == 1  # one batched call
    cl_loose = cluster_answers(["Paris", "Rome"], method="embedding", tau=0.7, embed=embed)
    assert len(cl_loose) == 1  # cos = 0.707
    with pytest.raises(ConformalError, match="shape"):
        cluster_answers(["Paris", "Lyon"], method="embedding", embed=lambda t: np.zeros((1, 2)))


def test_pluggable_equivalence_callable():
    pairs = []

    def same_first_letter(a: str, b: str) -> bool:
        pairs.append((a, b))
        return a[0].lower() == b[0].lower()

    cl = cluster_answers(["Paris", "Prague", "Lyon", "paris"], method=same_first_letter)
    assert [c.members for c in cl] == [("Paris", "Prague", "paris"), ("Lyon",)]
    # called as equivalent(representative, answer); identical normalised text short-circuits
    assert ("Paris", "Prague") in pairs
    assert ("Paris", "paris") not in pairs


def test_clustering_is_deterministic():
    rng = np.random.default_rng(3)
    vocab = ["Paris", "paris", "in Paris", "Lyon", "Nice", "I don't know", "Paris France"]
    answers = [vocab[i] for i in rng.integers(0, len(vocab), 30)]
    first = cluster_answers(answers)
    for _ in range(3):
        assert cluster_answers(answers) == first


def test_merge_clusters_keeps_best_confidence_and_chunks():
    c1 = cluster_answers(["Paris", "Paris", "Lyon", "I don't know"], chunk_id="c1")
    c2 = cluster_answers(["paris.", "Nice", "Nice", "Nice", "unknown"], chunk_id="c2")
    c3 = cluster_answers(["Lyon", "Lyon", "Lyon"], chunk_id="c3")
    merged = merge_clusters([("c1", c1), ("c2", c2), ("c3", c3)])
    by_norm = {m.normalized: m for m in merged}
    assert set(by_norm) == {"paris", "lyon", "nice", "i dont know"}
    assert by_norm["lyon"].confidence == 1.0
    assert by_norm["lyon"].chunk_ids == ("c3", "c1")
    assert dict(by_norm["lyon"].support) == {"c3": 1.0, "c1": 0.25}
    assert by_norm["paris"].confidence == 0.5
    assert by_norm["paris"].chunk_ids == ("c1", "c2")
    assert by_norm["paris"].count == 3
    abst = by_norm["i dont know"]
    assert abst.abstention and abst.chunk_ids == ("c1", "c2") and abst.confidence == 0.25
    # sorted by decreasing confidence
    confs = [m.confidence for m in merged]
    assert confs == sorted(confs, reverse=True)
    # total number of samples is preserved
    assert sum(m.count for m in merged) == 12


def test_merge_never_loses_an_answer_and_mapping_input():
    c1 = cluster_answers(["A b", "C d"], method="exact")
    c2 = cluster_answers(["A b", "E f"], method="exact")
    merged = merge_clusters({"x": c1, "y": c2}, method="exact")
    assert {m.normalized for m in merged} == {"b", "c d", "e f"}
    assert merge_clusters({}) == []
    assert merge_clusters({"x": []}) == []


def test_merge_same_chunk_clusters_keep_one_support_entry():
    # two clusters of one chunk that become equivalent under a looser merge rule
    c = cluster_answers(["Eiffel Tower", "Eiffel Tower Paris France"], method="exact")
    merged = merge_clusters({"c": c}, method="rouge1", tau=0.5)
    assert len(merged) == 1
    assert merged[0].support == (("c", 0.5),)


# ----------------------------------------------------------------------------- generation scores


def test_answer_matches_rules():
    assert answer_matches("Paris, France", ["Paris"])  # ROUGE-1 F1 = 0.667 > 0.3
    assert not answer_matches("the capital city of France is Paris", ["Paris"])  # F1 = 2/7 < 0.3
    assert answer_matches("the capital city of France is Paris", ["Paris"], threshold=0.2)
    assert answer_matches("The Paris!", ["paris"], match="exact")
    assert not answer_matches("Paris France", ["paris"], match="exact")
    assert not answer_matches("Paris", [])
    # abstentions only match abstention references
    assert answer_matches("I don't know", ["unanswerable"])
    assert not answer_matches("Paris", ["unanswerable"])
    assert not answer_matches("unknown", ["Paris"])
    with pytest.raises(ConformalError):
        answer_matches("Paris", ["Paris"], match="bleu")  # type: ignore[arg-type]


def test_rouge_match_threshold_is_strict():
    # F1("red blue", "red green") = 0.5: matches with threshold 0.49 but not 0.5
    assert answer_matches("red blue", ["red green"], threshold=0.49)
    assert not answer_matches("red blue", ["red green"], threshold=0.5)


def test_generation_score_takes_best_matching_confidence():
    cl = cluster_answers(["Lyon"] * 5 + ["Paris"] * 3 + ["in Paris"] * 2, method="exact")
    assert generation_score(cl, ["Paris"]) == -0.3  # "Paris" 0.3 beats "in Paris" 0.2
    assert generation_score(cl, ["Paris"], match="exact") == -0.3
    assert generation_score(cl, ["Lyon", "Paris"]) == -0.5
    assert generation_score(cl, ["in Paris"], match="exact") == -0.2


def test_generation_score_miss_is_inf_and_kept():
    cl = cluster_answers(["Lyon", "Nice", "I don't know"], method="exact")
    assert generation_score(cl, ["Paris"]) == math.inf
    assert generation_score([], ["Paris"]) == math.inf
    scores = [generation_score(cl, ["Paris"]), -0.5, -0.2, -1.0]
    assert coverage_ceiling(scores) == 0.75
    assert coverage_ceiling([math.inf, math.inf]) == 0.0
    with pytest.raises(CalibrationError):
        coverage_ceiling([])


def test_generator_set_threshold_with_ties():
    cl = cluster_answers(["A"] * 4 + ["B"] * 3 + ["C"] * 3, method="exact")
    # q_gen from a calibration score -3/10 must keep the 3/10 clusters (ties are kept)
    assert [c.representative for c in generator_set(cl, -3 / 10)] == ["A", "B", "C"]
    assert [c.representative for c in generator_set(cl, -0.31)] == ["A"]
    assert generator_set(cl, -0.5) == []
    assert len(generator_set(cl, math.inf)) == 3
    with pytest.raises(ConformalError):
        generator_set(cl, math.nan)


def test_cluster_dataclass_properties():
    c = AnswerCluster("The Louvre", ("The Louvre", "Louvre"), 0.4, support=(("a", 0.4), ("b", 0.1)))
    assert (c.count, c.score, c.normalized, c.chunk_ids) == (2, -0.4, "louvre", ("a", "b"))


def test_a_clustering_passed_whole_carries_its_own_abstention_test() -> None:
    """``method=Clustering(...)`` is the same as the keywords, plus a custom "I don't know" test."""
    from conformal_rag_plugins.core.clustering import Clustering

    answers = ["Paris", "pas de réponse", "Paris", "pas de réponse", "Lyon"]
    default = cluster_answers(answers, method="exact")
    assert not any(c.abstention for c in default)  # negative control: the default test knows English phrases only
    french = Clustering("exact", abstention=lambda a: (a or "").strip() in ("", "pas de réponse"))
    custom = cluster_answers(answers, method=french, chunk_id="c1")
    assert [(c.representative, c.count, c.abstention) for c in custom] == [
        ("Paris", 2, False),
        ("pas de réponse", 2, True),
        ("Lyon", 1, False),
    ]
    assert cluster_answers(answers, method=Clustering("rouge1", tau=0.5)) == cluster_answers(
        answers, method="rouge1", tau=0.5
    )
    merged = merge_clusters({"c1": custom}, method=Clustering("exact"))
    assert merged == merge_clusters({"c1": custom}, method="exact")
    with pytest.raises(ConformalError, match="inside the Clustering"):
        cluster_answers(answers, method=Clustering("rouge1"), tau=0.5)
