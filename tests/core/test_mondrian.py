"""Per-group (Mondrian) thresholds: core rule, fallback, strict, JSON round trip, tampering, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    SmallGroupWarning,
)
from conformal_rag_plugins.core.mondrian import group_thresholds
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile, pac_quantile
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer, calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.groups import group_labels, query_group, with_groups
from conformal_rag_plugins.retrieval.options import RetrievalOptions

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
ALPHA = 0.1


def _data(seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    sizes = {"a": 40, "b": 25, "c": 5}
    scores = np.concatenate([rng.exponential(1 + i, n) for i, n in enumerate(sizes.values())])
    labels = [g for g, n in sizes.items() for _ in range(n)]
    return scores, labels


def _cal(scores: np.ndarray, method: str = "split", delta: float | None = None) -> RetrievalCalibration:
    q = pac_quantile(scores, ALPHA, delta) if method == "pac" else conformal_quantile(scores, ALPHA)
    return RetrievalCalibration(q, ALPHA, method, "relative", 5, len(scores), 0, tuple(scores), FP, delta_=delta)


def test_group_thresholds_equal_direct_per_group_quantile() -> None:
    scores, labels = _data()
    pooled = conformal_quantile(scores, ALPHA)
    with pytest.warns(SmallGroupWarning, match="'c' has 5"):
        out = group_thresholds(scores, labels, ALPHA, pooled=pooled)
    lab = np.array(labels)
    for g in ("a", "b"):
        assert out[g].threshold == conformal_quantile(scores[lab == g], ALPHA)
        assert out[g].source == "group" and out[g].n == int((lab == g).sum())
    assert out["c"] == type(out["c"])(5, math.inf, "keep-all-small-group")
    named = group_thresholds(scores, labels, ALPHA, pooled=pooled, errors="ignore", fallback="pooled")
    assert named["c"] == type(out["c"])(5, pooled, "pooled-small-group")
    with pytest.raises(ConformalError, match="fallback must be one of"):
        group_thresholds(scores, labels, ALPHA, pooled=pooled, fallback="pool")
    with pytest.raises(ConformalError, match="errors must be one of"):
        group_thresholds(scores, labels, ALPHA, pooled=pooled, errors="quiet")


def test_pac_group_thresholds_use_pac_quantile() -> None:
    scores, labels = _data(1)
    out = group_thresholds(scores, labels, ALPHA, pooled=1.0, method="pac", delta=0.2, errors="ignore")
    assert out["a"].threshold == pac_quantile(scores[:40], ALPHA, 0.2)
    assert out["b"].threshold == pac_quantile(scores[40:65], ALPHA, 0.2)  # rank 25 of 25
    assert out["c"] == type(out["c"])(5, math.inf, "keep-all-small-group")  # 0.9^5 > 0.2: no PAC rank for 5 points


def test_strict_refuses_a_small_group() -> None:
    scores, labels = _data()
    with pytest.raises(CalibrationError, match="Group 'c' has 5 calibration"):
        group_thresholds(scores, labels, ALPHA, pooled=1.0, errors="raise")


def test_bad_inputs_are_clear_errors() -> None:
    scores, labels = _data()
    with pytest.raises(ConformalError, match="NaN"):
        group_thresholds(np.where(np.arange(scores.size) == 3, np.nan, scores), labels, ALPHA, pooled=1.0)
    with pytest.raises(CalibrationError, match="No calibration questions"):
        group_thresholds([], [], ALPHA, pooled=1.0)
    with pytest.raises(ConformalError, match="non-empty string"):
        group_thresholds(scores, [*labels[:-1], ""], ALPHA, pooled=1.0, errors="ignore")
    with pytest.raises(ConformalError, match="group labels"):
        group_thresholds(scores, labels[:-1], ALPHA, pooled=1.0)


def test_group_by_errors_name_the_question() -> None:
    examples = [CalibrationExample("Who won?", gold_ids=("x",), metadata={"tenant": "acme"})]
    assert group_labels(examples, "tenant") == ("acme",)
    with pytest.raises(ConformalError, match="'Who won\\?' has no metadata key 'team'"):
        group_labels(examples, "team")

    def boom(q: str) -> str:
        raise KeyError("no tenant")

    with pytest.raises(ConformalError, match=r"group_by raised KeyError.*Who won"):
        group_labels(examples, boom)
    with pytest.raises(ConformalError, match="non-empty string"):
        group_labels(examples, lambda q: None)
    with pytest.raises(ConformalError, match="query 'q'"):
        query_group(None, boom, "q")


def test_json_round_trip_recomputes_groups_and_old_files_load(tmp_path) -> None:
    scores, labels = _data()
    plain = _cal(scores)
    with pytest.warns(SmallGroupWarning):
        cal = with_groups(plain, labels, "tenant")
    path = cal.save(tmp_path / "g.json")
    back = RetrievalCalibration.load(path)
    assert back.groups_ == cal.groups_ and back.group_labels_ == tuple(labels) and back.group_by_ == "tenant"
    assert back.threshold_for("a") == (cal.groups_["a"]["threshold"], "group")
    assert back.threshold_for("c") == (math.inf, "keep-all-small-group")
    assert back.threshold_for("nope") == (math.inf, "keep-all-unknown-group")
    assert back.threshold_for(None) == (plain.threshold_, "pooled-no-group")
    assert back.group_fallback_ == "keep_all"
    # an ungrouped calibration writes no group fields, so the files older versions wrote still load
    old = plain.to_dict()
    assert not {"group_by", "groups", "group_labels"} & set(old)
    assert RetrievalCalibration.from_dict(old).groups_ == {}


def _rechecksum(data: dict) -> dict:
    from conformal_rag_plugins.storage.jsonio import with_checksum

    return with_checksum({k: v for k, v in data.items() if k != "checksum"})


def test_tampered_group_threshold_is_refused(tmp_path) -> None:
    scores, labels = _data()
    with pytest.warns(SmallGroupWarning):
        data = with_groups(_cal(scores), labels, "tenant").to_dict()
    bad = json.loads(json.dumps(data))
    bad["groups"]["a"]["threshold"] = bad["groups"]["a"]["threshold"] * 0.5
    with pytest.raises(CalibrationIntegrityError, match="group 'a'"):
        RetrievalCalibration.from_dict(_rechecksum(bad))
    moved = json.loads(json.dumps(data))
    moved["group_labels"][0] = "b"  # relabel a question: the counts no longer match
    with pytest.raises(CalibrationIntegrityError, match="group"):
        RetrievalCalibration.from_dict(_rechecksum(moved))
    missing = {k: v for k, v in data.items() if k != "groups"}
    with pytest.raises(CalibrationIntegrityError, match="stored together"):
        RetrievalCalibration.from_dict(_rechecksum(missing))


def test_calibrate_from_pools_with_auto_keeps_labels_aligned() -> None:
    rng = np.random.default_rng(3)
    obs, labels = [], []
    for i in range(120):
        s = np.sort(rng.random(6))[::-1]
        obs.append(PoolObservation(s, (int(rng.integers(0, 6)),)))
        labels.append("x" if i % 3 else "y")
    cal = calibrate_from_pools(
        obs,
        fingerprint=FP,
        pool_size=6,
        group_labels=labels,
        options=RetrievalOptions(confidence_level=0.9, score="auto", group_by="tenant"),
    )
    assert len(cal.group_labels_) == cal.n_calibration_ == 84
    lab = np.array(cal.group_labels_)
    for g in ("x", "y"):
        assert cal.groups_[g]["threshold"] == conformal_quantile(np.array(cal.scores_)[lab == g], 0.1)
    assert math.isfinite(RetrievalCalibration.from_dict(cal.to_dict()).threshold_for("y")[0])
    # grouping does not move the pooled calibration: same auto split, family, threshold and scores
    conformalizer = RetrievalConformalizer(0.9, score="auto")
    plain = conformalizer.conformalize_pools(obs, fingerprint=FP, pool_size=6).calibration_
    assert (plain.threshold_, plain.score_family_, plain.scores_) == (cal.threshold_, cal.score_family_, cal.scores_)
    with pytest.raises(CalibrationError, match="119 group labels for 120"):
        conformalizer.conformalize_pools(obs, fingerprint=FP, pool_size=6, groups=labels[:-1])


def test_calibrate_tuned_groups_the_calibration_part_only() -> None:
    from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool
    from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig, calibrate_tuned

    rng = np.random.default_rng(5)
    examples = [CalibrationExample(f"q{i}", gold_ids=(f"g{i}",), metadata={"tenant": f"t{i % 2}"}) for i in range(200)]
    pools = {}
    for config, width in {FusionConfig("zscore", 0.3): 2, FusionConfig("minmax", 0.5): 8}.items():
        for i in range(200):
            ids = [f"x{j}" for j in range(12)]
            ids[int(rng.integers(width))] = f"g{i}"
            pools[(config, f"q{i}")] = CandidatePool(tuple(ids), tuple(ids), np.sort(rng.random(12))[::-1])
    fetchers = {c: (lambda q, c=c: pools[(c, q)]) for c, _ in pools}

    def fingerprint(config: FusionConfig) -> Fingerprint:
        return Fingerprint("test", "Fake", "cosine", "toy", 3, f"fusion:{config.method}", f"hybrid({config.key})")

    kw = {"score": "rank", "random_state": 7, "progress": False}
    plain = calibrate_tuned(examples, fetchers, fingerprint, pool_size=12, options=RetrievalOptions(**kw)).calibration
    grouped = RetrievalOptions(**kw, group_by="tenant")
    cal = calibrate_tuned(examples, fetchers, fingerprint, pool_size=12, options=grouped).calibration
    assert cal.threshold_ == plain.threshold_ and sum(v["n"] for v in cal.groups_.values()) == 140
    with pytest.raises(ConformalError, match="no metadata key 'team'"):
        calibrate_tuned(examples, fetchers, fingerprint, pool_size=12, options=RetrievalOptions(**kw, group_by="team"))


def test_a_group_with_too_many_misses_keeps_its_honest_inf() -> None:
    from conformal_rag_plugins.core.errors import InfiniteThresholdWarning

    scores = np.r_[np.linspace(0, 1, 30), np.linspace(0, 1, 15), [np.inf] * 5]
    labels = ["a"] * 30 + ["m"] * 20  # group m: 5 misses of 20 > alpha (n + 1) = 2.1
    with pytest.warns(InfiniteThresholdWarning):
        out = group_thresholds(scores, labels, ALPHA, pooled=0.95)
    assert out["m"].threshold == math.inf and out["m"].source == "group"  # never the smaller pooled one
    with pytest.raises(CalibrationError, match="Group 'm'"):
        group_thresholds(scores, labels, ALPHA, pooled=0.95, errors="raise")


@pytest.mark.parametrize("family", ["relative", "similarity", "rank"])
def test_group_trials_pooled_rule_is_the_split_row_of_evaluate(family) -> None:
    """Same seeded splits and the same keep rule as ``evaluate_splits`` (vectorised, so checked exactly)."""
    from conformal_rag_plugins.core.splits import RandomSplits
    from conformal_rag_plugins.evaluation.mondrian_trials import simulate_group_splits
    from conformal_rag_plugins.evaluation.retrieval_trials import evaluate_splits

    rng = np.random.default_rng(9)
    obs = []
    for i in range(90):
        s = np.round(np.sort(rng.random(8))[::-1], 2)  # rounded: ties
        gold = () if i % 17 == 0 else (int(rng.integers(0, 8)),)
        obs.append(PoolObservation(s, gold))
    labels = [f"g{i % 3}" for i in range(90)]
    sim = simulate_group_splits(obs, labels, 0.2, family=family, splits=RandomSplits(trials=25, seed=4))
    row = next(
        r
        for r in evaluate_splits(obs, 0.2, family=family, splits=RandomSplits(trials=25, seed=4))
        if r.method == "split"
    )
    w = sim.n_test / sim.n_test.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.nansum(sim.coverage_pooled * w, axis=1), row.coverages, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.nansum(sim.size_pooled * w, axis=1), row.mean_sizes, rtol=0, atol=1e-12)
