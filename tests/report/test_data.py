"""The report's verdict, its tie explanations, the ECDF figure and the recorded host-tuning questions."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.core.coverage_band import split_conformal_band
from conformal_rag_plugins.core.errors import CalibrationIntegrityError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile, flagged_rank
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.report.data import (
    ThresholdRank,
    coverage_grid,
    coverage_verdict,
    grid_verdict,
    score_distribution,
    tie_levels,
)
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool
from conformal_rag_plugins.storage.jsonio import with_checksum
from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig, calibrate_tuned

FP = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "m", 384, "exp(-distance)", "dense(default)")
POOL = 20


def _pools(n: int, seed: int, top1: float | None = None) -> list[PoolObservation]:
    """Seeded pools of descending scores; the gold is first with probability ``top1`` (else geometric), or missed."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.sort(rng.uniform(0.2, 0.9, POOL))[::-1]
        rank = 0 if top1 is not None and rng.random() < top1 else int(rng.geometric(0.4)) - 1
        gold = () if rng.random() < 0.03 or rank >= POOL else (rank,)
        out.append(PoolObservation(scores, gold, question_id=f"s{seed}-q{i:04d}"))
    return out


def _fit(obs: list[PoolObservation], score: str, alpha: float = 0.1) -> RetrievalCalibration:
    return (
        RetrievalConformalizer(1 - alpha, score=score)
        .conformalize_pools(obs, fingerprint=FP, pool_size=POOL)
        .calibration_
    )


# --- the verdict line -------------------------------------------------------------------------------


def test_the_verdict_states_inside_below_above_and_no_band() -> None:
    band = split_conformal_band(300, 300, 0.1)
    lo, hi = band
    inside = coverage_verdict(0.904, 0.9, band, n_test=300, n_calibration=300)
    assert inside.status == "inside" and inside.consistent is True
    expected = f"held-out coverage 0.904 at target 0.9, inside the 95% band [{lo:.3f}, {hi:.3f}]"
    assert inside.text == expected + ": consistent with the guarantee"
    below = coverage_verdict(lo - 0.01, 0.9, band, n_test=300, n_calibration=300)
    assert below.status == "below" and below.consistent is False
    assert "below the 95% band" in below.text and "not consistent with the guarantee" in below.text
    # above with ties at the threshold: explained by them, still consistent (the guarantee is a lower bound)
    tied = coverage_verdict(
        hi + 0.01, 0.9, band, n_test=300, n_calibration=300, threshold=ThresholdRank(rank=271, n_at_or_below=290)
    )
    assert tied.status == "above" and tied.consistent is True
    assert "290 of the 300 calibration scores" in tied.text and "rank needs 271" in tied.text
    assert f"cover about {290 / 301:.3f}" in tied.text
    untied = coverage_verdict(
        hi + 0.01, 0.9, band, n_test=300, n_calibration=300, threshold=ThresholdRank(rank=271, n_at_or_below=271)
    )
    assert untied.status == "above" and "no ties at the threshold" in untied.text
    none = coverage_verdict(1.0, 0.9, split_conformal_band(5, 300, 0.1), n_test=300, n_calibration=5)
    assert none.status == "no_band" and none.consistent is None and "too few" in none.text
    assert none.to_dict()["band_low"] is None  # NaN is null in report.json
    # prefix for an answer-set calibration's retrieval stage
    assert coverage_verdict(0.9, 0.9, band, n_test=300, n_calibration=300, stage="retrieval-stage ").text.startswith(
        "retrieval-stage held-out coverage 0.900"
    )


def test_the_verdict_is_rarely_below_for_a_correct_threshold_and_often_for_a_wrong_one() -> None:
    """400 seeded draws of continuous scores: a correct split-conformal threshold is judged "below" in about
    2.5% of them (binomial tolerance); the negative control, a threshold computed at 1.5 alpha but reported at
    alpha, is judged "below" far more often."""
    rng = np.random.default_rng(5)
    n, n_test, alpha, reps = 100, 100, 0.2, 400
    band = split_conformal_band(n, n_test, alpha)
    below = {"split": 0, "wrong": 0}
    for _ in range(reps):
        cal, test = rng.random(n), rng.random(n_test)
        for name, a in (("split", alpha), ("wrong", 1.5 * alpha)):
            cov = float(np.mean(test <= conformal_quantile(cal, a)))
            verdict = coverage_verdict(cov, 1 - alpha, band, n_test=n_test, n_calibration=n)
            below[name] += verdict.status == "below"
    tolerance = 0.025 * reps + 3 * math.sqrt(reps * 0.025 * 0.975)
    assert below["split"] <= tolerance, below
    assert below["wrong"] > 3 * tolerance, below


def test_levels_above_the_band_are_explained_by_ties_of_the_relative_score() -> None:
    """With the relative score every top-1 gold scores 0: below the top-1 rate (about 0.7 here) the threshold
    is 0, the set keeps every top-1 hit and coverage sits above the band, explained by ties. The similarity
    score of the same pools has no ties, so none of its levels is explained by ties (negative control)."""
    obs = _pools(900, seed=3, top1=0.7)
    relative = _fit(obs[:300], "relative")
    grid = coverage_grid(relative, obs[300:])
    above = tie_levels(grid)
    levels = [t.level for t in above]
    assert {0.5, 0.55, 0.6, 0.65} <= set(levels), levels
    for t in above:
        if t.level <= 0.65:
            assert t.ties and t.threshold == 0.0 and t.n_at_or_below > t.rank
            assert "Scores tie at the threshold" in t.text
    data = grid.to_dict()
    at = data["levels"].index(0.5)
    misses = sum(1 for s in relative.scores_ if math.isinf(s))
    rank = flagged_rank(300, 0.5)
    assert rank is not None and data["ranks"][at] == rank.rank_for(misses)
    assert rank.rank_for(0) == math.ceil(301 * 0.5)  # the plain rank, when nothing missed
    assert data["n_at_or_below"][at] == sum(1 for s in relative.scores_ if s <= 0.0)
    similarity = _fit(obs[:300], "similarity")
    assert not any(t.ties for t in tie_levels(coverage_grid(similarity, obs[300:])))
    # the verdict at the calibrated level, computed from the same grid
    verdict = grid_verdict(grid)
    assert verdict.target == 0.9 and verdict.status in {"inside", "above"}


# --- the scores figure is an ECDF ---------------------------------------------------------------------


def test_the_scores_figure_is_an_ecdf_not_a_histogram() -> None:
    pytest.importorskip("matplotlib")
    from conformal_rag_plugins.report.plots import plot_scores

    obs = _pools(400, seed=4, top1=0.7)
    cal = _fit(obs[:200], "relative")
    dist = score_distribution(cal, obs[200:])
    fig = plot_scores(dist)
    ax = fig.axes[0]
    assert not ax.patches, "bars drawn: a histogram, not an ECDF"
    assert "Empirical CDF" in ax.get_title()
    steps = [line for line in ax.get_lines() if line.get_drawstyle() == "steps-post"]
    assert len(steps) == 2  # calibration and held-out
    ys = steps[0].get_ydata()
    assert np.all(np.diff(ys) >= 0)
    # shares are of every question, misses included: the curve ends at (n - misses) / n
    assert ys[-1] == pytest.approx((cal.n_calibration_ - cal.n_misses_) / cal.n_calibration_)
    # the jump at 0 is the share of calibration questions whose gold is ranked first
    zero = sum(1 for s in cal.scores_ if s == 0.0) / cal.n_calibration_
    xs = steps[0].get_xdata()
    assert ys[np.flatnonzero(np.asarray(xs) == 0.0)[-1]] == pytest.approx(zero)


# --- the questions that tuned the host are recorded ---------------------------------------------------


def test_auto_records_the_questions_that_chose_the_family(tmp_path: Path) -> None:
    obs = _pools(300, seed=6)
    cal = _fit(obs, "auto")
    sel = cal.selection_
    ids = sel["optimisation_question_ids"]
    assert len(ids) == sel["n_optimisation"] == 90
    assert not set(ids) & set(cal.question_ids_)
    assert set(ids) | set(cal.question_ids_) == {o.question_id for o in obs}
    again = RetrievalCalibration.load(cal.save(tmp_path / "cal.json"))
    assert again.selection_["optimisation_question_ids"] == ids


def test_tuned_calibration_records_the_questions_that_chose_the_host() -> None:
    rng = np.random.default_rng(0)
    n = 120
    examples = [CalibrationExample(f"q{i}", gold_ids=(f"g{i}",), id=f"id{i}") for i in range(n)]
    configs = (FusionConfig("zscore", 0.3), FusionConfig("minmax", 0.5))
    pools = {}
    for c in configs:
        for i in range(n):
            ids = [f"x{j}" for j in range(12)]
            ids[int(rng.integers(4))] = f"g{i}"
            pools[(c, f"q{i}")] = CandidatePool(tuple(ids), tuple(ids), np.sort(rng.random(12))[::-1])
    asked: dict[FusionConfig, set[str]] = {c: set() for c in configs}

    def fetcher(c: FusionConfig) -> Any:
        def fetch(q: str) -> CandidatePool:
            asked[c].add(q)
            return pools[(c, q)]

        return fetch

    def fingerprint(c: FusionConfig) -> Fingerprint:
        return Fingerprint("test", "Fake", "cosine", "toy", 3, f"fusion:{c.method}", f"hybrid({c.key})")

    tuned = calibrate_tuned(
        examples,
        {c: fetcher(c) for c in configs},
        fingerprint,
        pool_size=12,
        options=RetrievalOptions(progress=False),
    )
    sel = tuned.calibration.selection_
    other = next(c for c in configs if c != tuned.config)
    tuning = {ex.digest for ex in examples if ex.question in asked[other]}  # the other host saw only these
    assert set(sel["optimisation_question_ids"]) == tuning and len(tuning) == sel["n_optimisation"]
    assert not tuning & set(tuned.calibration.question_ids_)


def _resave(path: Path, change: Any) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    body = {k: v for k, v in data.items() if k != "checksum"}
    out = path.with_name("edited.json")
    out.write_text(json.dumps(with_checksum(body)), encoding="utf-8")
    return out


def _ids(data: dict[str, Any]) -> list[str]:
    return data["selection"]["optimisation_question_ids"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: _ids(d).append(d["question_ids"][0]), "also a calibration"),
        (lambda d: _ids(d).append("another"), "holds 91 ids"),
        (lambda d: _ids(d).__setitem__(1, _ids(d)[0]), "repeats a question"),
        (lambda d: d["selection"].update(optimisation_question_ids="q1"), "list of non-empty"),
        (lambda d: d["selection"].update(rule="manual"), "without a rule"),
    ],
)
def test_a_tampered_record_of_tuning_questions_is_refused(tmp_path: Path, change: Any, words: str) -> None:
    path = _fit(_pools(300, seed=6), "auto").save(tmp_path / "cal.json")
    with pytest.raises(CalibrationIntegrityError, match=words):
        RetrievalCalibration.load(_resave(path, change))


def test_files_saved_before_the_record_still_load(tmp_path: Path) -> None:
    path = _fit(_pools(300, seed=6), "auto").save(tmp_path / "cal.json")
    old = RetrievalCalibration.load(_resave(path, lambda d: d["selection"].pop("optimisation_question_ids")))
    assert old.selection_["n_optimisation"] == 90 and "optimisation_question_ids" not in old.selection_
