"""Recall control (issue 11 part 3): conformal risk control and Learn-then-Test of ``1 - recall``.

Unit checks on synthetic data; the real-data check is ``tests/evaluation/test_recall_trials.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    InfiniteThresholdWarning,
)
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile, crc_threshold, ltt_threshold
from conformal_rag_plugins.core.recall_risk import gold_nonconformity, recall_at, risk_curve
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, collect_observations

# The CRC and Learn-then-Test arithmetic under the plain rule (misses as loss); the in-pool rule that holds
# given the flag is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

FP = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
INF = math.inf


def random_gold(rng: np.random.Generator, n: int, max_gold: int = 4, p_out: float = 0.05) -> list[np.ndarray]:
    """Per question 1..max_gold gold nonconformities, rounded to make ties, some +inf (outside the pool)."""
    out = []
    for _ in range(n):
        g = np.round(rng.gamma(2.0, 0.1, size=int(rng.integers(1, max_gold + 1))), 2)
        g[rng.random(g.size) < p_out] = INF
        out.append(np.sort(g))
    return out


def true_risk(population: list[np.ndarray]):
    """``lam -> mean 1 - recall`` over a large population (the risk a calibration draw is judged by)."""
    lam, total, n = risk_curve(population)

    def risk(q: float) -> float:
        j = np.searchsorted(lam, q, side="right") - 1
        return 1.0 if j < 0 else float(total[j] / n)

    return risk


# --- the threshold rules -------------------------------------------------------------------------


def test_crc_with_one_gold_chunk_is_exactly_split_conformal() -> None:
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(400):
        n = int(rng.integers(1, 120))
        alpha = float(rng.choice([0.01, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.77]))
        s = np.round(rng.exponential(1.0, n), int(rng.integers(0, 3)))  # rounding makes ties
        s[rng.random(n) < 0.05] = INF
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            assert crc_threshold([[x] for x in s], alpha) == conformal_quantile(s, alpha), (n, alpha)
        checked += 1
    assert checked == 400


def test_risk_curve_and_recall_are_monotone() -> None:
    gold = random_gold(np.random.default_rng(1), 200)
    lam, total, n = risk_curve(gold)
    assert n == 200 and np.all(np.diff(lam) > 0) and np.all(np.diff(total) <= 1e-12)
    assert total[0] < n and total[-1] == pytest.approx(sum(np.isinf(g).sum() / g.size for g in gold))
    for g in gold[:20]:
        recalls = [recall_at(g, q) for q in (-1.0, *lam, INF)]
        assert recalls == sorted(recalls) and recalls[0] == 0.0
        assert recalls[-1] == pytest.approx(np.isfinite(g).mean())  # +inf gold is never kept, even at +inf


def test_crc_needs_every_gold_chunk_not_one() -> None:
    gold = [[0.1, 0.5]] * 19  # keeping 0.1 keeps one of two gold chunks: recall 1/2
    assert crc_threshold(gold, 0.1) == 0.5
    assert conformal_quantile([g[0] for g in gold], 0.1) == 0.1  # the single-gold rule stops at the best one


def test_crc_infinite_threshold_warns_or_raises() -> None:
    with pytest.warns(InfiniteThresholdWarning, match="rests on the pool"):
        assert crc_threshold([[0.1, INF]] * 50, 0.1) == INF  # half of each question's gold is outside the pool
    with pytest.raises(CalibrationError, match="calibration questions"):
        crc_threshold([[0.1]] * 5, 0.1, strict=True)  # n = 5 < 9: (0 + 1)/6 > 0.1
    with pytest.warns(InfiniteThresholdWarning, match="Learn-then-Test"):
        assert ltt_threshold([[0.1]] * 10, 0.1, 0.1) == INF  # 0.9**10 > 0.1: nothing can be rejected
    with pytest.raises(CalibrationError):
        ltt_threshold([[0.1]] * 10, 0.1, 0.1, strict=True)


@pytest.mark.parametrize(
    ("gold", "alpha", "match"),
    [
        ([[0.1, float("nan")]] * 20, 0.1, "NaN"),
        ([[0.1, -INF]] * 20, 0.1, "-inf"),
        ([[0.1], []] * 10, 0.1, "no gold chunk"),
        ([], 0.1, "No calibration questions"),
        ([[0.1]] * 20, 0.0, "strictly between 0 and 1"),
        ([[0.1]] * 20, 1.5, "strictly between 0 and 1"),
    ],
)
def test_bad_input_is_refused(gold, alpha, match) -> None:
    for rule in (lambda: crc_threshold(gold, alpha), lambda: ltt_threshold(gold, alpha, 0.1)):
        with pytest.raises(ConformalError, match=match):
            rule()


def test_gold_nonconformity_pads_gold_outside_the_pool() -> None:
    assert gold_nonconformity("relative", [0.9, 0.8, 0.4], [2, 1], n_gold=4).tolist() == pytest.approx(
        [0.1, 0.5, INF, INF]
    )
    with pytest.raises(CalibrationError, match="smaller"):
        gold_nonconformity("rank", [0.9, 0.8], [0, 1], n_gold=1)
    with pytest.raises(CalibrationError, match="outside"):
        gold_nonconformity("rank", [0.9, 0.8], [2])


def test_crc_and_ltt_are_valid_on_synthetic_data_and_the_plug_in_rule_is_not() -> None:
    """Over R calibration draws: mean risk(CRC) <= alpha, P(risk(LTT) > alpha) <= delta (binomial tolerances).

    Negative control: the plug-in rule (smallest lam whose calibration risk is <= alpha, no
    correction) exceeds alpha in about half of the draws, far beyond delta.
    """
    rng = np.random.default_rng(2)
    population = random_gold(rng, 20_000, p_out=0.02)
    risk = true_risk(population)
    alpha, delta, n, draws = 0.1, 0.1, 100, 250
    crc_risks, ltt_fail, ltt_finite, plug_fail = [], 0, 0, 0
    for _ in range(draws):
        cal = [population[i] for i in rng.integers(0, len(population), n)]
        crc_risks.append(risk(crc_threshold(cal, alpha)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            q_ltt = ltt_threshold(cal, alpha, delta)
        ltt_fail += risk(q_ltt) > alpha
        ltt_finite += math.isfinite(q_ltt)
        lam, total, _ = risk_curve(cal)
        ok = np.flatnonzero(total / n <= alpha)
        plug_fail += risk(float(lam[ok[0]]) if ok.size else INF) > alpha
    crc_risks_arr = np.asarray(crc_risks)
    tol = 3 * crc_risks_arr.std(ddof=1) / math.sqrt(draws)
    assert crc_risks_arr.mean() <= alpha + tol, (crc_risks_arr.mean(), tol)
    assert crc_risks_arr.mean() >= alpha - 0.03  # and it is not trivially conservative
    binomial_tol = 3 * math.sqrt(delta * (1 - delta) / draws)
    assert ltt_fail / draws <= delta + binomial_tol, ltt_fail
    assert ltt_finite >= 0.9 * draws, ltt_finite  # LTT was tested, not skipped by +inf
    assert plug_fail / draws > delta + binomial_tol, plug_fail  # the same check fails a wrong rule


# --- the calibration object and its file ---------------------------------------------------------


def multi_gold_observations(n: int = 60, seed: int = 3) -> list[PoolObservation]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.sort(rng.random(10))[::-1]
        gold = tuple(sorted(rng.choice(10, size=int(rng.integers(1, 4)), replace=False).tolist()))
        out.append(PoolObservation(scores, gold, question_id=f"q{i}", n_gold=len(gold) + int(i % 7 == 0)))
    return out


def recall_cal(method: str = "split", delta: float | None = None) -> RetrievalCalibration:
    con = RetrievalConformalizer(0.8, control="recall", method=method, delta=delta)
    return con.conformalize_pools(multi_gold_observations(), fingerprint=FP, pool_size=10).calibration_


def resign(data: dict) -> dict:
    body = {k: v for k, v in data.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return {**body, "checksum": hashlib.sha256(canon.encode()).hexdigest()}


def test_recall_calibration_records_its_risk_and_gold() -> None:
    obs = multi_gold_observations()
    cal = recall_cal()
    assert (cal.risk_, cal.method_, cal.delta_) == ("recall", "crc", None)
    gold = [o.gold_scores("relative") for o in obs]
    assert cal.threshold_ == crc_threshold(gold, 0.2)
    assert cal.scores_ == tuple(g[0] for g in gold) and cal.n_misses_ == sum(np.isinf(g[0]) for g in gold)
    assert "risk=recall" in cal.summary() and cal.summary().startswith("crc alpha=0.2")
    split = RetrievalConformalizer(0.8).conformalize_pools(obs, fingerprint=FP, pool_size=10).calibration_
    assert split.risk_ == "miscoverage" and "risk=" not in split.summary()
    assert cal.threshold_ >= split.threshold_  # every gold chunk needs at least as large a set
    ltt = recall_cal("ltt", 0.1)
    assert (ltt.method_, ltt.delta_) == ("ltt", 0.1) and ltt.threshold_ == ltt_threshold(gold, 0.2, 0.1)
    assert recall_cal("crc").threshold_ == cal.threshold_ and recall_cal("pac", 0.1).method_ == "ltt"


@pytest.mark.parametrize(("method", "delta"), [("split", None), ("ltt", 0.2)])
def test_recall_file_round_trips_and_recomputes(tmp_path: Path, method, delta) -> None:
    cal = recall_cal(method, delta)
    path = cal.save(tmp_path / "cal.json")
    data = json.loads(path.read_text())
    assert data["risk"] == "recall" and len(data["gold_scores"]) == data["n"] == 60
    assert "+inf" in {s for g in data["gold_scores"] for s in g if isinstance(s, str)}
    again = RetrievalCalibration.load(path)
    assert again == cal and again.gold_scores_ == cal.gold_scores_ and again.risk_ == "recall"


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.update(threshold=d["threshold"] * 0.5), ["disagrees", "recomputed"]),
        (lambda d: d["gold_scores"][0].append(0.0), ["best of its gold"]),
        (lambda d: d.update(gold_scores=[[1e-9] * len(g) for g in d["gold_scores"]]), ["best of its gold"]),
        (lambda d: d.update(gold_scores=d["gold_scores"][:-1]), ["gold_scores"]),
        (lambda d: d.update(risk="miscoverage"), ["controls recall"]),
        (lambda d: (d.pop("gold_scores"), d.update(method="split")), ["needs method 'crc' or 'ltt'"]),
        (lambda d: d.update(method="ltt"), ["'ltt' without delta"]),
        (lambda d: d.update(risk="precision"), ["risk"]),
    ],
)
def test_tampered_recall_file_is_refused(tmp_path: Path, edit, words) -> None:
    path = recall_cal().save(tmp_path / "cal.json")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(resign(data)))
    with pytest.raises(CalibrationIntegrityError) as info:
        RetrievalCalibration.load(path)
    for w in words:
        assert w in str(info.value), info.value


def test_old_file_without_risk_loads_as_miscoverage(tmp_path: Path) -> None:
    split = RetrievalConformalizer(0.8).conformalize_pools(multi_gold_observations(), fingerprint=FP, pool_size=10)
    data = split.calibration_.to_dict()
    assert data["risk"] == "miscoverage" and "gold_scores" not in data
    del data["risk"]  # as written before recall control existed
    old = RetrievalCalibration.from_dict(resign(data))
    assert old.risk_ == "miscoverage" and old.gold_scores_ == () and old.threshold_ == split.threshold_
    data["gold_scores"] = [[0.1]] * data["n"]
    with pytest.raises(CalibrationIntegrityError, match="gold_scores without risk 'recall'"):
        RetrievalCalibration.from_dict(resign(data))


def test_conformalizer_refuses_bad_recall_settings() -> None:
    obs = multi_gold_observations()
    with pytest.raises(CalibrationError, match="control must be"):
        RetrievalConformalizer(0.8, control="precision").conformalize_pools(obs, fingerprint=FP, pool_size=10)
    with pytest.raises(CalibrationError, match="needs delta"):
        RetrievalConformalizer(0.8, control="recall", method="ltt").conformalize_pools(
            obs, fingerprint=FP, pool_size=10
        )
    with pytest.raises(CalibrationError, match="method must be 'crc'"):
        RetrievalConformalizer(0.8, control="recall", method="bogus").conformalize_pools(
            obs, fingerprint=FP, pool_size=10
        )
    with pytest.raises(CalibrationError, match="calibration questions"):
        RetrievalConformalizer(0.8, control="recall", strict=True).conformalize_pools(
            [PoolObservation(np.array([1.0, 0.5]), (0,), n_gold=3)] * 30, fingerprint=FP, pool_size=2
        )


def test_auto_family_with_recall_is_chosen_on_a_disjoint_split() -> None:
    cal = RetrievalConformalizer(0.8, control="recall", score="auto").conformalize_pools(
        multi_gold_observations(100), fingerprint=FP, pool_size=10
    )
    chosen = cal.calibration_
    assert chosen.selection_["rule"] == "auto" and chosen.selection_["chosen"] == chosen.score_family_
    assert chosen.n_calibration_ == 70 and chosen.risk_ == "recall"


def test_collect_observations_counts_gold_outside_the_pool() -> None:
    examples = [
        CalibrationExample("q1", gold_ids=("a", "b", "z")),  # z is not retrieved
        CalibrationExample("q2", gold_texts=("text c", "text c ")),  # one gold text, stripped
    ]
    pool = CandidatePool(("a", "b", "c"), ("text a", "text b", "text c"), np.array([0.9, 0.8, 0.7]))
    obs = collect_observations(examples, lambda q: pool, progress=False)
    assert [(o.gold_positions, o.n_gold) for o in obs] == [((0, 1), 3), ((2,), 1)]
    assert obs[0].gold_scores("rank").tolist() == [1.0, 2.0, INF]


def test_answer_sets_refuse_a_recall_retrieval_stage() -> None:
    from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration

    with pytest.raises(CalibrationError, match="control='coverage'"):
        AnswerSetCalibration.from_stages(
            recall_cal(), [-1.0] * 60, alpha=0.4, n_samples=4, model="fake", clustering={"method": "rougeL"}
        )


def test_end_to_end_alignment_refuses_a_recall_retrieval_stage() -> None:
    from conformal_rag_plugins.answer_sets.stages import align_stages

    with pytest.raises(CalibrationError, match="control='coverage'"):
        align_stages(recall_cal(), [CalibrationExample("q", gold_ids=("a",))])
