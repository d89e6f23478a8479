"""The report on a file saved under the plain rank says its sets are never flagged (issue 41, 5).

Such a file serves its stored (plain-rank) thresholds and its sets never say ``guaranteed``; the report
said "consistent with the guarantee" and no more, and checked the current rule's threshold rather
than the one the file serves. Now the verdict checks the served threshold and says the sets are never
flagged, from Python (``calibrated_verdict``, what ``ConformalRetriever.evaluate`` prints) and in the
command line's figures (``build_figures``). Thresholds come from the library, never hard-coded.
"""

from __future__ import annotations

import numpy as np

from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE, conformal_quantile, threshold_rule
from conformal_rag_plugins.report.data import calibrated_verdict, coverage_grid, grid_verdict
from conformal_rag_plugins.report.figures import build_figures
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
# 100 questions, one miss: the flag rule's rank is not the plain one (with or without misses in other rules)
SCORES = (*(i / 100 for i in range(1, 100)), float("inf"))


def _old() -> RetrievalCalibration:
    with threshold_rule(PLAIN_RANK_RULE):
        q = conformal_quantile(SCORES, 0.1)
    return RetrievalCalibration(q, 0.1, "split", "similarity", 5, 100, 1, SCORES, FP, threshold_rule_=PLAIN_RANK_RULE)


def _observations() -> list[PoolObservation]:
    rng = np.random.default_rng(0)
    return [PoolObservation(np.sort(rng.uniform(0, 1, 5))[::-1], (int(rng.integers(0, 5)),)) for _ in range(60)]


def test_the_verdict_on_an_old_rule_file_says_its_sets_are_never_flagged() -> None:
    """Fails before the fix: the text ended at "consistent with the guarantee"."""
    old, current = _old(), _old().with_current_rule()
    text = calibrated_verdict(old, 0.9, 200).text
    assert "consistent with the guarantee" in text
    assert "never flagged guaranteed" in text and "'plain-rank'" in text and "with_current_rule()" in text
    assert "never flagged" not in calibrated_verdict(current, 0.9, 200).text  # the control: a current file


def test_the_report_checks_the_threshold_an_old_file_serves() -> None:
    """Fails before the fix: the grid recomputed the current rule's threshold, not the stored plain-rank one."""
    old = _old()
    current_threshold = conformal_quantile(SCORES, 0.1)
    assert old.threshold_ != current_threshold  # the two rules differ here, so the check can tell them apart
    grid = coverage_grid(old, _observations())
    assert grid.thresholds[grid.levels.index(0.9)] == old.threshold_
    fresh = coverage_grid(old.with_current_rule(), _observations())
    assert fresh.thresholds[fresh.levels.index(0.9)] == current_threshold


def test_the_command_lines_verdict_says_so_too() -> None:
    old = _old()
    obs = _observations()
    _, numbers = build_figures(old, obs)
    assert numbers["verdict"]["text"].startswith(grid_verdict(coverage_grid(old, obs)).text)
    assert "never flagged guaranteed" in numbers["verdict"]["text"]
    _, fresh = build_figures(old.with_current_rule(), obs)
    assert "never flagged" not in fresh["verdict"]["text"]
