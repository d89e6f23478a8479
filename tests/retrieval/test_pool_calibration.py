"""Unit tests for the evaluation loop, the calibration driver and the shared input checks."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.core.pools import PoolObservation, choose_family
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.core.validation import check_alpha, check_scores
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.evaluation.retrieval_trials import evaluate_splits
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, check_gold_ids, collect_observations

FP = Fingerprint("unit", "ListStore", "ip", "toy", None, "raw")


# --- validation --------------------------------------------------------------------------------------


def test_check_alpha():
    assert check_alpha(0.1) == 0.1
    assert check_alpha(np.float32(0.25)) == 0.25
    assert check_alpha("0.5") == 0.5
    for bad in (0, 1, -0.5, 2, float("nan"), float("inf"), None, "x", [0.1]):
        with pytest.raises(ConformalError):
            check_alpha(bad)
    with pytest.raises(ConformalError, match="delta"):
        check_alpha(0, "delta")


def test_check_scores():
    np.testing.assert_array_equal(check_scores([0.2, math.inf]), [0.2, math.inf])
    assert check_scores(np.array([[1.0, 2.0]])).shape == (2,)
    with pytest.raises(CalibrationError, match="No calibration scores"):
        check_scores([])
    with pytest.raises(CalibrationError, match="1 calibration score"):
        check_scores([0.1, float("nan")])
    with pytest.raises(CalibrationError, match="-inf"):
        check_scores([-math.inf])
    with pytest.raises(CalibrationError, match="finite"):
        check_scores([math.inf], allow_pos_inf=False)


# --- PoolObservation / choose_family / evaluate_splits -------------------------------------------------


def test_pool_observation_scores_and_coverage():
    obs = PoolObservation(np.array([0.9, 0.7, 0.4, 0.1]), (2, 3))
    assert obs.score("rank") == 3.0
    assert obs.score("relative") == pytest.approx(0.5)
    assert obs.score("similarity") == -0.4
    assert obs.covered_and_size("rank", 2.0) == (False, 2)
    assert obs.covered_and_size("rank", 3.0) == (True, 3)
    assert obs.covered_and_size("similarity", -0.4) == (True, 3)
    miss = PoolObservation(np.array([0.9, 0.7]), ())
    assert miss.score("relative") == math.inf
    assert miss.covered_and_size("relative", math.inf) == (False, 2)


def test_choose_family_picks_smallest_mean_set():
    # gold always first, top scores vary: rank (and relative) give size 1, similarity more -> rank (earlier)
    rank_like = [PoolObservation(t - 0.01 * np.arange(10), (0,)) for t in np.linspace(0.3, 0.95, 40)]
    assert choose_family(rank_like, 0.1) == "rank"
    assert choose_family(rank_like, 0.1, families=("relative", "rank")) == "relative"  # ties -> earlier
    # gold always at 0.8 with dense scores just below it: similarity is the tightest
    sim_like = []
    for i in range(40):
        p = i % 5
        scores = [0.8 + 0.03 * (p - j) for j in range(p)] + [0.8] + [0.79 - 0.01 * j for j in range(10 - p - 1)]
        sim_like.append(PoolObservation(np.array(scores), (p,)))
    assert choose_family(sim_like, 0.1) == "similarity"


def _synthetic(n: int, seed: int) -> list[PoolObservation]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        scores = np.sort(rng.uniform(0, 1, 30))[::-1].copy()
        gold = () if rng.random() < 0.03 else (int(min(rng.geometric(0.3) - 1, 29)),)
        out.append(PoolObservation(scores, gold))
    return out


def test_evaluate_splits_rows_and_coverage():
    obs = _synthetic(400, 0)
    rows = {
        s.method: s
        for s in evaluate_splits(obs, 0.1, splits=RandomSplits(trials=20, seed=1), pac_delta=0.1, topk=(1, 5))
    }
    assert set(rows) == {"split", "pac", "topk@1", "topk@5", "conflare"}
    split = rows["split"].as_row()
    assert split["trials"] == 20
    assert split["alpha"] == 0.1
    # marginal coverage of the split method is near 1 - alpha (200 test points x 20 trials)
    assert 0.86 <= split["mean_coverage"] <= 0.96
    # PAC is more conservative than split on average
    assert rows["pac"].as_row()["mean_coverage"] >= split["mean_coverage"] - 0.01
    assert rows["pac"].as_row()["mean_set_size"] >= split["mean_set_size"]
    # top-k sizes are exactly k
    assert rows["topk@5"].as_row()["mean_set_size"] == 5.0
    assert rows["topk@1"].as_row()["median_set_size"] == 1.0
    # reproducible with the same seed
    again = {
        s.method: s
        for s in evaluate_splits(obs, 0.1, splits=RandomSplits(trials=20, seed=1), pac_delta=0.1, topk=(1, 5))
    }
    assert again["split"].coverages == rows["split"].coverages


def test_evaluate_splits_auto_runs_and_reports_split():
    rows = evaluate_splits(_synthetic(200, 3), 0.2, family="auto", splits=RandomSplits(trials=5, seed=0), topk=())
    methods = {r.method for r in rows}
    assert methods == {"split", "conflare"}
    assert all(len(r.coverages) == 5 for r in rows)


# --- driver ------------------------------------------------------------------------------------------


def test_candidate_pool_from_unsorted_sorts_stably():
    pool = CandidatePool.from_unsorted(["a", "b", "c", "d"], ["ta", "tb", "tc", "td"], [0.2, 0.9, 0.2, 0.5])
    assert pool.ids == ("b", "d", "a", "c")  # a before c: stable on ties
    assert pool.texts == ("tb", "td", "ta", "tc")
    np.testing.assert_array_equal(pool.scores, [0.9, 0.5, 0.2, 0.2])
    with pytest.raises(CalibrationError, match="without a score"):
        CandidatePool.from_unsorted(["a"], ["t"], [None])
    with pytest.raises(CalibrationError, match="NaN"):
        CandidatePool.from_unsorted(["a"], ["t"], [float("nan")])


def test_check_gold_ids():
    examples = [CalibrationExample("q1", gold_ids=("a",)), CalibrationExample("q2", gold_ids=("zz", "b"))]
    check_gold_ids(examples[:1], {"a", "b"})
    with pytest.raises(CalibrationError, match="'zz'"):
        check_gold_ids(examples, {"a", "b"})


def test_collect_observations_and_calibrate(caplog):
    corpus = {f"d{i}": f"text {i}" for i in range(10)}

    def fetch(question: str) -> CandidatePool:
        # a fake host: the question's number decides where its gold document lands
        k = int(question.split()[-1])
        ids = [f"d{(k + j) % 10}" for j in range(5)]
        scores = [1.0 - 0.1 * j - 0.001 * k for j in range(5)]
        return CandidatePool.from_unsorted(ids, [corpus[i] for i in ids], scores)

    examples = [CalibrationExample(f"question {k}", gold_ids=(f"d{(k + k % 6) % 10}",)) for k in range(40)]
    obs = collect_observations(examples, fetch, progress=False)
    assert len(obs) == 40
    # gold at position k % 6 when that is inside the pool of 5, else a miss (6 of 40)
    assert [o.gold_positions for o in obs] == [((k % 6),) if k % 6 < 5 else () for k in range(40)]
    with caplog.at_level(logging.WARNING, logger="conformal_rag_plugins"):
        cal = calibrate_from_pools(
            obs,
            fingerprint=FP,
            pool_size=5,
            options=RetrievalOptions(confidence_level=0.8, score="rank"),
        )
    ranks = [o.score("rank") for o in obs]
    # n = 40, alpha = 0.2: rank 33; 6 misses are at most n - k = 7, so the threshold is finite
    assert cal.threshold_ == conformal_quantile(ranks, 0.2) == sorted(ranks)[32] == 5.0
    assert cal.n_misses_ == sum(math.isinf(r) for r in ranks) == 6
    assert "kept as misses" in caplog.text


def test_collect_observations_rejects_bad_examples():
    with pytest.raises(CalibrationError, match="No calibration examples"):
        collect_observations([], lambda q: None, progress=False)  # type: ignore[arg-type,return-value]
    with pytest.raises(CalibrationError, match="neither gold ids nor gold texts"):
        collect_observations([CalibrationExample("unlabelled")], lambda q: None, progress=False)  # type: ignore
