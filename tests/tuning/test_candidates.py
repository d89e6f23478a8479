"""calibrate_tuned over (unit, fusion, pool) candidates: tokens objective, larger pools, fan-out, per-unit gold."""

from __future__ import annotations

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool
from conformal_rag_plugins.tuning.candidates import (
    CandidateSearch,
    TokenCosts,
    TunedCandidate,
    candidate_grid,
    default_pool_sizes,
)
from conformal_rag_plugins.tuning.options import TuningOptions
from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig, calibrate_tuned, fusion_of

Z = FusionConfig("zscore", 0.5)
N = 200


def _examples() -> list[CalibrationExample]:
    return [CalibrationExample(f"q{i}", gold_ids=(f"c{i}",)) for i in range(N)]


def _parent_examples() -> list[CalibrationExample]:
    return [CalibrationExample(f"q{i}", gold_ids=(f"P{i}",)) for i in range(N)]


def _pool(i: int, cand: TunedCandidate, seed: int) -> CandidatePool:
    """Chunks (10 tokens): gold at rank 0-3, missed by a 2-pool in 1 question of 8; parents (500 tokens): rank 0."""
    rng = np.random.default_rng(seed * 1000 + i)
    if cand.unit == "parent:max":
        ids = [f"P{i}"] + [f"X{j}" for j in range(cand.pool_size - 1)]
        texts = ["word " * 500] * len(ids)
    else:
        ids = [f"x{j}" for j in range(cand.pool_size)]
        pos = 2 + i % 2 if i % 8 == 0 else int(rng.integers(2))
        if pos < cand.pool_size:
            ids[pos] = f"c{i}"
        texts = ["word " * 10] * len(ids)
    return CandidatePool(tuple(ids), tuple(texts), np.linspace(1.0, 0.1, len(ids)))


def _fingerprint(cand: TunedCandidate) -> Fingerprint:
    return Fingerprint("test", "Fake", "cosine", "toy", 3, "fusion", f"hybrid({cand.label(2)})")


def test_tokens_choose_chunks_and_a_larger_pool_from_one_fanout_per_question() -> None:
    cands, base_of = candidate_grid([Z], (2, 4), ("chunk", "parent:max"))
    questions = {ex.question: i for i, ex in enumerate(_examples())}
    fanned: list[str] = []
    fetched: dict[TunedCandidate, list[str]] = {c: [] for c in cands}

    def fanout(q):
        fanned.append(q)
        return {c: _pool(questions[q], c, 1) for c in cands}

    def fetcher(c):
        return lambda q: fetched[c].append(q) or _pool(questions[q], c, 1)

    tuned = calibrate_tuned(
        _examples(),
        {c: fetcher(c) for c in cands},
        _fingerprint,
        pool_size=2,
        options=RetrievalOptions(score="rank", progress=False),
        search=CandidateSearch(
            base_of=base_of,
            fanout=fanout,
            token_costs=TokenCosts(lambda t: len(t.split())),
            unit_examples={"parent:max": _parent_examples()},
        ),
    )
    sel = tuned.calibration.selection_
    # the 2-chunk pool misses 1/8 > alpha: left out; parents have fewer units but 50x the tokens
    assert tuned.candidate == TunedCandidate("chunk", Z, 4) and tuned.config == Z
    assert sel["tuning_objective"] == "tokens" and sel["unit"] == "chunk" and sel["pool_size"] == 4
    assert "zscore:0.5" in sel["infeasible"] and sel["candidate"] == "zscore:0.5@4"
    assert sel["grid"]["parent:max/zscore:0.5|rank"] < sel["grid"]["zscore:0.5@4|rank"]
    assert sel["mean_tokens"]["parent:max/zscore:0.5|rank"] > 10 * sel["mean_tokens"]["zscore:0.5@4|rank"]
    assert tuned.calibration.pool_size_ == 4 and tuned.calibration.fingerprint_ == _fingerprint(tuned.candidate)
    assert len(fanned) == sel["n_optimisation"] == 60 and len(set(fanned)) == 60
    assert set(fetched) == set(cands) and all(not v for c, v in fetched.items() if c != tuned.candidate)
    assert len(fetched[tuned.candidate]) == 140 and not set(fetched[tuned.candidate]) & set(fanned)
    # the saved calibration keeps the choice, and the host is rebuilt from it
    again = RetrievalCalibration.from_dict(tuned.calibration.to_dict())
    assert again.selection_ == sel and fusion_of(again) == Z and again.pool_size_ == 4


def test_size_objective_and_parent_gold() -> None:
    """With objective='size' the fewest units win: the parent level, scored against parent gold."""
    cands, base_of = candidate_grid([Z], (2, 4), ("chunk", "parent:max"))
    questions = {ex.question: i for i, ex in enumerate(_examples())}
    tuned = calibrate_tuned(
        _examples(),
        {c: (lambda q, c=c: _pool(questions[q], c, 2)) for c in cands},
        _fingerprint,
        pool_size=2,
        options=RetrievalOptions(score="rank", progress=False),
        tuning=TuningOptions(objective="size"),
        search=CandidateSearch(
            base_of=base_of,
            token_costs=TokenCosts(lambda t: len(t.split())),
            unit_examples={"parent:max": _parent_examples()},
        ),
    )
    assert tuned.candidate.unit == "parent:max" and tuned.calibration.selection_["tuning_objective"] == "size"
    assert tuned.calibration.n_misses_ == 0 and tuned.calibration.threshold_ == 1.0


def test_a_larger_pool_competes_only_when_the_base_pool_misses_over_half_alpha() -> None:
    cands, base_of = candidate_grid([Z], (4, 8))
    questions = {ex.question: i for i, ex in enumerate(_examples())}
    tuned = calibrate_tuned(
        _examples(),
        {c: (lambda q, c=c: _pool(questions[q], c, 3)) for c in cands},
        _fingerprint,
        pool_size=4,
        options=RetrievalOptions(score="rank", progress=False),
        search=CandidateSearch(base_of=base_of),
    )
    sel = tuned.calibration.selection_
    assert sel["skipped"] == ["zscore:0.5@8"] and sel["pool_size"] == 4 and sel["tuning_objective"] == "size"


def test_pool_sizes_are_checked() -> None:
    assert default_pool_sizes(10) == (10, 20, 40)
    with pytest.raises(CalibrationError, match="must contain"):
        default_pool_sizes(10, [20, 40])
    with pytest.raises(CalibrationError, match="integers >= 1"):
        default_pool_sizes(10, [10, 0])
    with pytest.raises(CalibrationError, match="integers >= 1"):
        default_pool_sizes(0)


def test_bad_objective_and_misaligned_unit_examples_fail_before_any_query() -> None:
    def fetch(q):
        raise AssertionError("queried")

    with pytest.raises(CalibrationError, match="objective must be one of"):
        calibrate_tuned(_examples(), {Z: fetch}, _fingerprint, pool_size=2, tuning=TuningOptions(objective="latency"))
    with pytest.raises(CalibrationError, match="same 200 questions"):
        calibrate_tuned(
            _examples(),
            {Z: fetch},
            _fingerprint,
            pool_size=2,
            search=CandidateSearch(unit_examples={"parent:max": []}),
        )


def test_token_costs_are_counted_once_per_unit() -> None:
    calls: list[str] = []
    costs = TokenCosts(lambda t: calls.append(t) or len(t))
    pool = CandidatePool(("a", "b"), ("xx", "yyy"), np.array([0.9, 0.1]))
    assert costs(pool) == {"a": 2.0, "b": 3.0} and costs(pool) == {"a": 2.0, "b": 3.0} and len(calls) == 2


def test_report_refuses_a_parent_level_calibration_by_name() -> None:
    from conformal_rag_plugins.commands.report_host import host_spec

    fp = Fingerprint(
        "llamaindex", "QueryFusionRetriever[...]", "cosine", "m", 384, "fusion:x", "fusion(...)>parent:max"
    )
    cal = RetrievalCalibration(
        0.5, 0.2, "split", "relative", 3, 9, 0, (0.5,) * 9, fp,
        selection_={"rule": "tuned-hybrid", "fusion_method": "minmax", "dense_weight": 0.7},
    )  # fmt: skip
    with pytest.raises(CalibrationError, match=r"parent documents \(parent:max"):
        host_spec(cal)
