"""Issue 41, item 2: the pool-miss bound a flagged set assumes is the user's to set, recorded, and said.

``RetrievalOptions(miss_bound=b)`` reaches every threshold (pooled, per group, recall), is saved and checked on
load; a pool that misses more than the bound warns (``PoolMissWarning``) from every calibration path and per
group; a served set whose threshold is +inf says why.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import (
    CalibrationIntegrityError,
    ConformalError,
    GuaranteeCutWarning,
    InfiniteThresholdWarning,
    PoolMissWarning,
)
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile, crc_threshold
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer, calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import serve_set
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")


def pools(n: int, misses: int, seed: int = 0, prefix: str = "q") -> list[PoolObservation]:
    """``n`` pools of 10 whose gold sits at a seeded position; the last ``misses`` have no gold in the pool."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.sort(rng.random(10))[::-1]
        gold = () if i >= n - misses else (int(rng.integers(0, 10)),)
        out.append(PoolObservation(scores, gold, question_id=f"{prefix}{i}"))
    return out


def fit(obs: list[PoolObservation], **kw: object) -> RetrievalCalibration:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return (
            RetrievalConformalizer(0.9, score="similarity", **kw)
            .conformalize_pools(  # type: ignore[arg-type]
                obs, fingerprint=FP, pool_size=10
            )
            .calibration_
        )


def test_miss_bound_zero_is_the_plain_rank_and_is_recorded(tmp_path: Path) -> None:
    obs = pools(30, 0)
    scores = [o.score("similarity") for o in obs]
    plain = fit(obs, miss_bound=0)
    assert plain.threshold_ == conformal_quantile(scores, 0.1, miss_bound=0)
    assert plain.miss_bound_ == 0.0
    # n = 30 without misses: the default bound needs rank 29, the plain rank is 28 (a smaller set)
    assert fit(obs).threshold_ > plain.threshold_ and fit(obs).miss_bound_ is None
    path = plain.save(tmp_path / "cal.json")
    assert json.loads(path.read_text())["miss_bound"] == 0.0
    again = RetrievalCalibration.load(path)
    assert again.miss_bound_ == 0.0 and again.threshold_ == plain.threshold_
    assert "miss_bound" not in fit(obs).to_dict()  # a default file is unchanged for older readers


def test_the_options_object_carries_the_bound_to_the_threshold() -> None:
    obs = pools(60, 4)
    got = calibrate_from_pools(
        obs, fingerprint=FP, pool_size=10, options=RetrievalOptions(score="similarity", miss_bound=0.08)
    )
    scores = [o.score("similarity") for o in obs]
    assert got.threshold_ == conformal_quantile(scores, 0.1, miss_bound=0.08) and got.miss_bound_ == 0.08
    assert got.threshold_ != conformal_quantile(scores, 0.1)  # the default bound gives another rank here


@pytest.mark.parametrize("bad", [-0.1, 0.1, 0.5])
def test_a_bound_outside_zero_alpha_is_refused_before_any_work(bad: float) -> None:
    with pytest.raises(ConformalError, match="miss_bound"):
        RetrievalConformalizer(0.9, miss_bound=bad).conformalize_pools(pools(20, 0), fingerprint=FP, pool_size=10)


def test_an_edited_bound_is_refused_on_load(tmp_path: Path) -> None:
    cal = fit(pools(60, 4), miss_bound=0)
    data = cal.to_dict()
    data.pop("checksum")
    data["miss_bound"] = 0.05  # another bound gives another threshold than the stored one
    with pytest.raises(CalibrationIntegrityError):
        RetrievalCalibration.from_dict(with_checksum(data))
    data["miss_bound"] = 0.2  # not below alpha
    with pytest.raises(CalibrationIntegrityError, match="miss_bound"):
        RetrievalCalibration.from_dict(with_checksum(data))


def test_groups_and_recall_use_the_bound() -> None:
    obs = pools(80, 0)
    groups = ["a"] * 30 + ["b"] * 50
    fitted = RetrievalConformalizer(0.9, score="similarity", miss_bound=0).conformalize_pools(
        obs, fingerprint=FP, pool_size=10, groups=groups
    )
    a_scores = [o.score("similarity") for o in obs[:30]]
    assert fitted.calibration_.groups_["a"]["threshold"] == conformal_quantile(a_scores, 0.1, miss_bound=0)
    gold = [[i / 40] for i in range(1, 41)]
    rec = RetrievalConformalizer(0.9, score="similarity", control="recall", miss_bound=0)
    obs_recall = [PoolObservation(np.array([1.0, g[0]]), (1,), question_id=f"r{i}") for i, g in enumerate(gold)]
    got = rec.conformalize_pools(obs_recall, fingerprint=FP, pool_size=2).calibration_
    assert got.threshold_ == crc_threshold([[-g[0]] for g in gold], 0.1, miss_bound=0)


def test_the_plain_crc_with_one_gold_chunk_is_the_plain_rank() -> None:
    """Why recall control does not count misses as loss (issue 41): with one gold chunk per question that is
    the plain rank, whose flag fails given the flag (tests/evaluation/test_flag_exact.py)."""
    rng = np.random.default_rng(3)
    for n in (20, 50, 100):
        scores = np.where(rng.random(n) < 0.05, math.inf, rng.random(n))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            assert crc_threshold([[s] for s in scores], 0.1, miss_bound=0) == conformal_quantile(
                scores, 0.1, miss_bound=0
            )


def test_pool_miss_warning_comes_from_observed_pools_and_per_group() -> None:
    """conformalize_pools warned nothing before; a small group missing above the bound beside a clean one warns
    by name (pooled, its misses are under the bound)."""
    obs = pools(180, 0, seed=1) + pools(20, 3, seed=2, prefix="s")
    groups = ["clean"] * 180 + ["small"] * 20
    with pytest.warns(PoolMissWarning, match="Group 'small'") as record:
        RetrievalConformalizer(0.9, score="similarity").conformalize_pools(
            obs, fingerprint=FP, pool_size=10, groups=groups
        )
    assert not any("Group 'clean'" in str(w.message) for w in record)
    with pytest.warns(PoolMissWarning, match="flag is withdrawn"):
        fit_warn = RetrievalConformalizer(0.9, score="similarity")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            fit_warn.conformalize_pools(pools(100, 12), fingerprint=FP, pool_size=10)


def test_a_served_set_says_why_its_threshold_is_inf() -> None:
    cal = fit(pools(100, 12))  # 12 misses of 100: past the 0.9 quantile of Binomial(100, 0.05)
    assert math.isinf(cal.threshold_) and "contradict the assumed pool-miss rate" in cal.infinite_reason_
    with pytest.warns(GuaranteeCutWarning):
        served = serve_set(cal, np.linspace(0.9, 0.1, 10), [{}] * 10)
    assert not served.decision.guaranteed
    assert "contradict the assumed pool-miss rate" in served.decision.reason
    assert fit(pools(100, 2)).infinite_reason_ == ""
