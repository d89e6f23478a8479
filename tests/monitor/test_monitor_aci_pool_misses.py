"""ACI counts a gold chunk outside the pool as a miss, also when its threshold is ``+inf``.

Seeded simulation: a calibration with every gold chunk in the pool, then a stream where
about 20% of the gold chunks are outside the pool. ACI's level then drops below 0 (threshold
``+inf``: keep every candidate), but those sets still miss. The miss rate ACI's own updates
imply, ``alpha - (alpha_{T+1} - alpha_1) / (gamma T)``, must be the served sets' real one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.retrieval_scores import keep_mask
from conformal_rag_plugins.monitor.monitor import ConformalMonitor, CoverageTracking
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
POOL, ALPHA, GAMMA = 20, 0.1, 0.05


def _question(rng: np.random.Generator, p_outside: float) -> PoolObservation:
    scores = np.sort(rng.uniform(0.2, 0.9, POOL))[::-1]
    if rng.random() < p_outside:
        return PoolObservation(scores, ())  # the gold chunk is not in the pool
    return PoolObservation(scores, (int(min(rng.geometric(0.5) - 1, POOL - 1)),))


def test_aci_reported_error_is_the_served_sets_miss_rate_with_gold_outside_the_pool() -> None:
    rng = np.random.default_rng(21)
    cal_obs = [_question(rng, 0.0) for _ in range(300)]
    cal = RetrievalConformalizer(1 - ALPHA, score="relative").conformalize_pools(
        cal_obs, fingerprint=FP, pool_size=POOL
    )
    monitor = ConformalMonitor.from_observations(
        cal.calibration_, cal_obs, delta=0.05, coverage=CoverageTracking(aci_gamma=GAMMA)
    )
    stream = [_question(rng, 0.2) for _ in range(1000)]
    served_misses, infinite_sets = 0, 0
    for q in stream:
        threshold = monitor.aci_threshold()  # the set served for this query, before its label
        infinite_sets += threshold == math.inf
        kept = np.flatnonzero(keep_mask("relative", q.scores, threshold)).tolist()
        served_misses += not set(q.gold_positions) & set(kept)
        monitor.observe_label(nonconformity=q.score("relative"))
    n = len(stream)
    served = served_misses / n
    reported = ALPHA - (monitor.aci_alpha - ALPHA) / (GAMMA * n)  # sum of ACI's err_t over n, from its updates
    assert infinite_sets > 0 and 0.15 < served < 0.3  # the +inf sets occur, and the pool misses ~20%
    assert reported == pytest.approx(served, abs=1e-9)
    assert monitor.aci_miss_rate == pytest.approx(served, abs=1e-12)
    fixed = cal.calibration_.threshold_
    assert [c for c, _ in monitor.labels] == [q.score("relative") <= fixed < math.inf for q in stream]


def test_aci_miss_rule() -> None:
    from conformal_rag_plugins.core.online_coverage import aci_miss

    assert aci_miss(math.inf, math.inf) and aci_miss(math.inf, 0.5) and aci_miss(0.6, 0.5)
    assert not aci_miss(0.5, 0.5) and not aci_miss(3.0, math.inf)


def test_a_monitor_saved_with_the_old_count_still_loads(tmp_path) -> None:
    from conformal_rag_plugins.core.errors import CalibrationIntegrityError
    from conformal_rag_plugins.storage.jsonio import with_checksum

    rng = np.random.default_rng(5)
    cal_obs = [_question(rng, 0.0) for _ in range(100)]
    cal = RetrievalConformalizer(1 - ALPHA).conformalize_pools(cal_obs, fingerprint=FP, pool_size=POOL).calibration_
    monitor = ConformalMonitor.from_observations(cal, cal_obs, coverage=CoverageTracking(aci_gamma=0.2))
    monitor.observe_label(nonconformity=5.0)  # a miss: alpha_t = 0.1 - 0.2 * 0.9 = -0.08, threshold +inf
    assert monitor.aci_threshold() == math.inf
    monitor.observe_label(nonconformity=math.inf)  # still a miss: -0.26 (older versions: -0.06)
    assert monitor.aci_alpha == pytest.approx(-0.26) and monitor.aci_errors == [True, True]
    data = {k: v for k, v in monitor.to_dict().items() if k != "checksum"}
    old = with_checksum(data | {"aci_alpha": 0.1 - 0.18 + 0.02})
    with pytest.warns(UserWarning, match="counted a gold chunk outside the pool as covered"):
        again = ConformalMonitor.from_dict(old, cal)
    assert again.aci_alpha == pytest.approx(-0.26)
    with pytest.raises(CalibrationIntegrityError, match="ACI alpha"):
        ConformalMonitor.from_dict(with_checksum(data | {"aci_alpha": 0.5}), cal)
