"""Tuned hybrid: configuration + family chosen on the optimisation split only, threshold on the rest."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conformal_rag_plugins.core.config_search import choose_configuration, evaluate_tuned_splits
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, label_counts
from conformal_rag_plugins.tuning.fusion_config import DEFAULT_FUSION_GRID
from conformal_rag_plugins.tuning.options import TuningOptions
from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig, calibrate_tuned


def _obs(scores, gold) -> PoolObservation:
    return PoolObservation(np.asarray(scores, dtype=float), tuple(gold))


def test_choose_configuration_prefers_the_smaller_set_and_breaks_ties_by_order() -> None:
    sharp = [_obs([0.9, 0.1, 0.05], (0,))] * 30
    flat = [_obs([0.9, 0.85, 0.8], (2,))] * 30
    choice = choose_configuration({"flat": flat, "sharp": sharp}, 0.1, families=("rank", "relative"))
    assert (choice.config, choice.family) == ("sharp", "rank")
    assert choice.mean_sizes["flat|rank"] == 3.0 and choice.mean_sizes["sharp|rank"] == 1.0
    assert choice.n_optimisation == 30
    tie = choose_configuration({"b": sharp, "a": sharp}, 0.1, families=("rank",))
    assert tie.config == "b"


@pytest.mark.parametrize(
    ("observations", "message"),
    [
        ({}, "No configurations"),
        ({"a": [_obs([1.0], (0,))], "b": []}, "one observation per question"),
        ({"a": []}, "optimisation split is empty"),
    ],
)
def test_choose_configuration_bad_input(observations, message) -> None:
    with pytest.raises(ConformalError, match=message):
        choose_configuration(observations, 0.1)


def test_unknown_family_is_refused() -> None:
    with pytest.raises(ConformalError, match="Unknown score family"):
        choose_configuration({"a": [_obs([1.0], (0,))]}, 0.1, families=("cosine",))


def test_fusion_config_keys_and_errors() -> None:
    assert [c.key for c in DEFAULT_FUSION_GRID] == [
        "zscore:0.3",
        "zscore:0.5",
        "zscore:0.7",
        "minmax:0.3",
        "minmax:0.5",
        "minmax:0.7",
    ]
    assert FusionConfig.parse(" minmax:0.25") == FusionConfig("minmax", 0.25)
    for bad, msg in [("zscore", "method:weight"), ("rrf:0.5", "must be one of"), ("zscore:1.5", r"\[0, 1\]")]:
        with pytest.raises(CalibrationError, match=msg):
            FusionConfig.parse(bad)
    with pytest.raises(CalibrationError, match="Bad fusion weight"):
        FusionConfig.parse("zscore:heavy")


def _world(n: int, seed: int = 0):
    """Questions with three hosts: 'good' puts gold at rank 0-1, 'bad' at rank 0-9, 'mid' in between."""
    rng = np.random.default_rng(seed)
    examples = [CalibrationExample(f"q{i}", gold_ids=(f"g{i}",)) for i in range(n)]
    spread = {FusionConfig("zscore", 0.3): 2, FusionConfig("zscore", 0.5): 5, FusionConfig("minmax", 0.5): 10}
    pools = {}
    for config, width in spread.items():
        for i in range(n):
            pos = int(rng.integers(width))
            ids = [f"x{j}" for j in range(12)]
            ids[pos] = f"g{i}"
            scores = np.sort(rng.random(12))[::-1]
            pools[(config, f"q{i}")] = CandidatePool(tuple(ids), tuple(ids), scores)
    return examples, spread, pools


def _fingerprint(config: FusionConfig) -> Fingerprint:
    return Fingerprint("test", "Fake", "cosine", "toy", 3, f"fusion:{config.method}", f"hybrid({config.key})")


def test_calibrate_tuned_never_queries_other_configurations_on_the_calibration_split() -> None:
    examples, spread, pools = _world(200)
    calls: dict[FusionConfig, list[str]] = {c: [] for c in spread}

    def fetcher(config):
        def fetch(q):
            calls[config].append(q)
            return pools[(config, q)]

        return fetch

    tuned = calibrate_tuned(
        examples,
        {c: fetcher(c) for c in spread},
        _fingerprint,
        pool_size=12,
        options=RetrievalOptions(score="rank", random_state=7),
    )
    assert tuned.config == FusionConfig("zscore", 0.3)
    n_opt = tuned.calibration.selection_["n_optimisation"]
    assert n_opt == 60 and tuned.calibration.n_calibration_ == 140
    opt_questions = set(calls[FusionConfig("minmax", 0.5)])
    assert len(opt_questions) == n_opt
    for config in spread:
        if config != tuned.config:
            assert set(calls[config]) == opt_questions  # the others only ever saw the optimisation split
    calibration_questions = set(calls[tuned.config]) - opt_questions
    assert len(calibration_questions) == 140 and not calibration_questions & opt_questions
    # the threshold is the finite-sample quantile of the chosen host's scores on the calibration split only
    expected = conformal_quantile(
        [
            float(pools[(tuned.config, q)].ids.index(f"g{q[1:]}") + 1)
            for q in sorted(calibration_questions, key=lambda s: int(s[1:]))
        ],
        0.1,
    )
    assert tuned.calibration.threshold_ == expected
    assert tuned.calibration.fingerprint_ == _fingerprint(tuned.config)
    sel = tuned.calibration.selection_
    assert sel["rule"] == "tuned-hybrid" and sel["fusion_method"] == "zscore" and sel["dense_weight"] == 0.3
    assert set(sel["grid"]) == {f"{c.key}|rank" for c in spread}


def test_choice_does_not_depend_on_the_calibration_split() -> None:
    """Corrupting every calibration-split pool of the other hosts leaves the choice unchanged."""
    examples, spread, pools = _world(120, seed=3)
    first = calibrate_tuned(
        examples,
        {c: (lambda q, c=c: pools[(c, q)]) for c in spread},
        _fingerprint,
        pool_size=12,
        options=RetrievalOptions(progress=False),
    )
    opt_ids = set()
    seen: list[str] = []
    calibrate_tuned(
        examples,
        {c: (lambda q, c=c: seen.append(q) or pools[(c, q)]) for c in spread},
        _fingerprint,
        pool_size=12,
        options=RetrievalOptions(progress=False),
    )
    opt_ids = {q for q in seen if seen.count(q) == len(spread)}
    corrupted = dict(pools)
    for (config, q), pool in pools.items():
        if q not in opt_ids:
            corrupted[(config, q)] = CandidatePool(pool.ids[::-1], pool.texts[::-1], pool.scores)  # nonsense
    second = calibrate_tuned(
        examples,
        {c: (lambda q, c=c: corrupted[(c, q)]) for c in spread},
        _fingerprint,
        pool_size=12,
        options=RetrievalOptions(progress=False),
    )
    assert second.config == first.config
    assert second.calibration.score_family_ == first.calibration.score_family_
    assert second.calibration.selection_["grid"] == first.calibration.selection_["grid"]


def test_calibrate_tuned_bad_input() -> None:
    examples, spread, pools = _world(20)
    fetchers = {c: (lambda q, c=c: pools[(c, q)]) for c in spread}
    with pytest.raises(CalibrationError, match="needs at least 19 calibration questions"):
        calibrate_tuned(
            examples,
            fetchers,
            _fingerprint,
            pool_size=12,
            options=RetrievalOptions(confidence_level=0.95, progress=False),
        )
    with pytest.raises(CalibrationError, match="grid is empty"):
        calibrate_tuned(examples, {}, _fingerprint, pool_size=12)
    with pytest.raises(CalibrationError, match="score must be"):
        calibrate_tuned(examples, fetchers, _fingerprint, pool_size=12, options=RetrievalOptions(score="cosine"))
    with pytest.raises(ConformalError, match="strictly between 0 and 1"):
        calibrate_tuned(
            examples,
            fetchers,
            _fingerprint,
            pool_size=12,
            options=RetrievalOptions(confidence_level=1.0),
        )
    with pytest.raises(CalibrationError, match="optimisation_fraction"):
        calibrate_tuned(
            examples,
            fetchers,
            _fingerprint,
            pool_size=12,
            tuning=TuningOptions(optimisation_fraction=1.0),
        )


def _tuning_world(n: int, seed: int = 11) -> dict[str, list[PoolObservation]]:
    rng = np.random.default_rng(seed)
    configs = {}
    for key, width in (("a", 3), ("b", 6), ("c", 12)):
        obs = []
        for _ in range(n):
            scores = np.sort(rng.random(15))[::-1].copy()
            obs.append(_obs(scores, (int(rng.integers(width)),)))
        configs[key] = obs
    return configs


def test_tuned_protocol_chooses_the_tight_configuration() -> None:
    _, choices = evaluate_tuned_splits(_tuning_world(400), 0.1, splits=RandomSplits(trials=200, seed=5))
    assert sum(choices.values()) == 200
    assert max(choices, key=choices.get).startswith("a|")


@pytest.mark.usefixtures("plain_rank_rule")  # the exact plain rank (the pool-miss rule: test_quantile_flagged.py)
def test_tuned_protocol_keeps_coverage_over_random_splits(monkeypatch) -> None:
    """Mean coverage over random splits is >= 1-alpha within Monte Carlo error; a rule without (n+1) fails.

    Conditional on the data set, a random split makes the calibration and test questions an
    exchangeable draw from it (the choice uses the disjoint optimisation part only), so the
    split-averaged coverage is >= ceil((n+1)(1-alpha))/(n+1) exactly. The tolerance is three
    standard errors of the mean over ``trials`` splits, with the per-split variance bounded by the
    Beta variance of conformal coverage (calibration draw) plus the binomial one (test draw).
    The continuous ``relative`` family makes the bound tight, so the negative control can fail.
    """
    from conformal_rag_plugins.core import quantile

    n, alpha, trials = 100, 0.1, 1000
    configs = _tuning_world(n)
    n_test = n - round(n * 0.5)
    n_cal = round(n * 0.5) - round(round(n * 0.5) * 0.3)
    k = quantile.conformal_rank(n_cal, alpha)
    beta_var = k * (n_cal + 1 - k) / ((n_cal + 1) ** 2 * (n_cal + 2))
    tol = 3 * math.sqrt(beta_var + alpha * (1 - alpha) / n_test) / math.sqrt(trials)
    summary, _ = evaluate_tuned_splits(
        configs, alpha, splits=RandomSplits(trials=trials, seed=5), families=("relative",)
    )
    assert np.mean(summary.coverages) >= 1 - alpha - tol, (np.mean(summary.coverages), tol)
    assert np.mean(summary.coverages) <= k / (n_cal + 1) + tol  # and it is the exact rank, not more
    monkeypatch.setattr(quantile, "conformal_rank", lambda n, a: math.ceil(n * (1 - a)))
    wrong, _ = evaluate_tuned_splits(configs, alpha, splits=RandomSplits(trials=trials, seed=5), families=("relative",))
    assert np.mean(wrong.coverages) < 1 - alpha - tol, (np.mean(wrong.coverages), tol)


def test_evaluate_tuned_splits_needs_three_parts() -> None:
    with pytest.raises(ConformalError, match="too few"):
        evaluate_tuned_splits({"a": [_obs([1.0], (0,))] * 2}, 0.1)


def test_label_counts_are_recorded_and_survive_json(tmp_path) -> None:
    examples = [
        CalibrationExample("a", gold_ids=("x",), metadata={"gold_rule": "answer-in-chunk"}),
        CalibrationExample("b", gold_ids=("y",), metadata={"gold_rule": "all-chunks-fallback", "label_rule": "judge"}),
        CalibrationExample("c", gold_ids=("z",)),
    ]
    counts = label_counts(examples)
    assert counts == {"gold_rule": {"all-chunks-fallback": 1, "answer-in-chunk": 1}, "label_rule": {"judge": 1}}
    cal = RetrievalCalibration(
        threshold_=2.0,
        alpha_=0.5,  # flagged_rank(3, 0.5): rank 3 of 3 (the plain rank would be ceil(4 * 0.5) = 2)
        method_="split",
        score_family_="rank",
        pool_size_=5,
        n_calibration_=3,
        n_misses_=0,
        scores_=(1.0, 1.0, 2.0),
        fingerprint_=_fingerprint(FusionConfig("zscore", 0.5)),
        labels_=counts,
    )
    path = cal.save(tmp_path / "cal.json")
    assert json.loads(path.read_text())["labels"] == counts
    assert RetrievalCalibration.load(path).labels_ == counts
