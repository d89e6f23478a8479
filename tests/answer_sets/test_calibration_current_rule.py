"""``AnswerSetCalibration.with_current_rule()``: the upgrade path the docs and ``reason_`` name (issue 41, 5).

A file saved before thresholds accounted for pool misses (retrieval ``threshold_rule`` ``"plain-rank"``)
loads with its old thresholds and is never flagged guaranteed; its ``reason_`` says to call
``with_current_rule()``, which ``RetrievalCalibration`` had and ``AnswerSetCalibration`` did not. It
recomputes both stages' thresholds from the stored scores under the current rule and keeps the provenance.
Expected thresholds come from the library's own combination rules, never hard-coded.
"""

from __future__ import annotations

import json
import math

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, StageProvenance
from conformal_rag_plugins.answer_sets.identity import generator_record
from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.core.combination import bonferroni_thresholds, pac_thresholds
from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE, conformal_quantile, threshold_rule
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
N, ALPHA = 100, 0.2
RET = (*(i / N for i in range(N - 1)), math.inf)  # one retrieval miss
GEN = (*(-1.0 + i / N for i in range(N - 1)), math.inf)  # one generator miss
IDS = tuple(f"q{i:03d}" for i in range(N))
RECORD = generator_record({"llm": {"class": "Fake", "name": "toy"}, "sampling": {"temperature": 1.0, "n_samples": 4}})
OPTIMISATION = {"n_optimisation": 2, "optimisation_question_ids": ["o1", "o2"], "pilot": {"question_ids": ["p1"]}}
SPLITS = {"bonferroni": SplitOptions(), "pac": SplitOptions(method="pac", delta=0.2), "hmp": SplitOptions(method="hmp")}


def _old(method: str) -> AnswerSetCalibration:
    """As an older version saved it: every threshold at the plain rank."""
    with threshold_rule(PLAIN_RANK_RULE):
        q = conformal_quantile(RET, 0.1)
    retrieval = RetrievalCalibration(
        q, 0.1, "split", "relative", 5, N, 1, RET, FP, question_ids_=IDS, threshold_rule_=PLAIN_RANK_RULE
    )
    return AnswerSetCalibration.from_stages(
        retrieval,
        GEN,
        alpha=ALPHA,
        split=SPLITS[method],
        n_samples=4,
        model="fake",
        clustering={"method": "exact"},
        provenance=StageProvenance(question_ids=IDS, optimisation=OPTIMISATION, generator=RECORD),
    )


@pytest.mark.parametrize("method", ["bonferroni", "pac", "hmp"])
def test_an_old_rule_file_upgrades_to_the_current_rule_keeping_its_provenance(method: str, tmp_path) -> None:
    """Fails before the fix: AnswerSetCalibration had no with_current_rule (AttributeError)."""
    old_path = _old(method).save(tmp_path / "old.json")
    old = AnswerSetCalibration.load(old_path)
    assert old.retrieval_.threshold_rule_ == PLAIN_RANK_RULE
    assert old.guaranteed_ is False and "with_current_rule()" in old.reason_

    new = old.with_current_rule()
    assert new.retrieval_.threshold_rule_ != PLAIN_RANK_RULE and new.retrieval_.stale_rule_reason_ == ""
    assert new.guaranteed_ is True and new.reason_ == ""
    # the provenance and the scores are kept; only thresholds move
    assert (new.question_ids_, new.optimisation_, new.generator_, new.created_at_) == (
        old.question_ids_,
        old.optimisation_,
        old.generator_,
        old.created_at_,
    )
    assert (new.generation_scores_, new.retrieval_.scores_) == (old.generation_scores_, old.retrieval_.scores_)
    assert (new.alpha_, new.method_, new.alpha_retrieval_, new.alpha_generation_) == (
        old.alpha_,
        old.method_,
        old.alpha_retrieval_,
        old.alpha_generation_,
    )
    # the thresholds are those of the current rule on the stored scores (the library's own functions)
    if method == "bonferroni":
        rule = bonferroni_thresholds(RET, GEN, ALPHA, alpha_ret=new.alpha_retrieval_, alpha_gen=new.alpha_generation_)
        expected = (rule.q_ret, rule.q_gen)
    elif method == "pac":
        rule = pac_thresholds(
            RET, GEN, ALPHA, 0.2, epsilon_split=(new.alpha_retrieval_, new.alpha_generation_), delta_split=(0.1, 0.1)
        )
        expected = (rule.q_ret, rule.q_gen)
    else:
        expected = (conformal_quantile(RET, new.alpha_retrieval_), math.inf)
    assert (new.retrieval_threshold_, new.generation_threshold_) == expected
    assert new.retrieval_.threshold_ == conformal_quantile(RET, 0.1)  # the stage's own, recomputed too
    if method != "hmp":  # the negative control: the plain rank's thresholds are not the current rule's
        assert (old.retrieval_threshold_, old.generation_threshold_) != expected

    # saved and loaded again: under the current rule, unchanged
    again = AnswerSetCalibration.load(new.save(tmp_path / "new.json"))
    assert again == new and again.guaranteed_ and again.optimisation_ == OPTIMISATION
    assert json.loads((tmp_path / "new.json").read_text())["guaranteed"] is True
    assert again.with_current_rule() is again  # already current: itself
