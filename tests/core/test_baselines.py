"""Exact reproduction of the CONFLARE calibration-distance oracle (tests/data/conflare_README.md)."""

from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.core.baselines import conflare_keep, conflare_threshold
from conformal_rag_plugins.core.quantile import conformal_quantile, conformal_rank

# The plain rank (a pool that cannot miss); the rule for pools that can is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

INF = math.inf
DATA = Path(__file__).resolve().parents[1] / "data" / "conflare_calibration_records.json"

# (alpha, conformal rank, conformal threshold, CONFLARE threshold), from the README beside the data
ORACLE = [
    (0.10, 91, 0.46596068143844604, 0.4555095613002778),
    (0.05, 96, 0.5122858881950378, 0.5096138954162598),
]


@pytest.fixture(scope="module")
def records() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def distances(records) -> list[float]:
    return records["cosine_distances"]


def test_oracle_file_matches_its_readme(records, distances):
    assert len(distances) == 100
    assert len(set(distances)) == 100  # all distinct, as the README says
    assert min(distances) == pytest.approx(0.11752, abs=1e-5)
    assert max(distances) == pytest.approx(0.57114, abs=1e-5)
    assert float(np.median(distances)) == pytest.approx(0.31516, abs=1e-5)
    assert len(records["questions"]) == 100
    ranks = records["relevant_chunk_rank"]
    assert max(ranks) == 50
    assert sum(r == 0 for r in ranks) == 63
    # 28 records stopped at the source chunk (relevant rank == source rank)
    assert sum(a == b for a, b in zip(ranks, records["source_chunk_rank"], strict=True)) == 28
    assert "MIT" in records["license"]


@pytest.mark.parametrize(("alpha", "rank", "conformal", "_conflare"), ORACLE)
def test_conformal_threshold_exact(distances, alpha, rank, conformal, _conflare):
    # rank in exact integer arithmetic: ceil(101 * (1 - alpha))
    a = Fraction(str(alpha))
    assert -(-(101 * (a.denominator - a.numerator)) // a.denominator) == rank
    assert conformal_rank(100, alpha) == rank
    q = conformal_quantile(distances, alpha)
    assert q == conformal  # exact, no tolerance
    assert q == sorted(distances)[rank - 1]


@pytest.mark.parametrize(("alpha", "_rank", "_conformal", "conflare"), ORACLE)
def test_conflare_threshold_matches_published_rule(distances, alpha, _rank, _conformal, conflare):
    assert conflare_threshold(distances, alpha) == pytest.approx(conflare, abs=1e-12, rel=0)
    # the same rule written out: linear interpolation at h = (1 - alpha)(n - 1), 0-based
    d = sorted(distances)
    h = (1 - alpha) * (len(d) - 1)
    lo = int(np.floor(h))
    manual = d[lo] + (h - lo) * (d[lo + 1] - d[lo])
    assert manual == pytest.approx(conflare, abs=1e-12, rel=0)


@pytest.mark.parametrize(
    ("alpha", "rank", "conformal", "conflare", "below_conflare", "at_or_below_conformal"),
    [(*row, pct_c, pct_q) for row, pct_c, pct_q in zip(ORACLE, (90, 95), (91, 96), strict=True)],
)
def test_in_sample_fractions(distances, alpha, rank, conformal, conflare, below_conflare, at_or_below_conformal):
    thr_conflare = conflare_threshold(distances, alpha)
    thr_conformal = conformal_quantile(distances, alpha)
    # CONFLARE keeps a chunk iff distance < threshold (strict); conformal keeps distance <= q-hat
    assert sum(conflare_keep(d, thr_conflare) for d in distances) == below_conflare
    assert sum(d <= thr_conformal for d in distances) == at_or_below_conformal == rank
    # CONFLARE's percentile has no (n+1) correction: it is smaller, so it keeps fewer chunks
    assert thr_conflare < thr_conformal


def test_conflare_keep_is_strict():
    assert conflare_keep(0.2, 0.25) is True
    assert conflare_keep(0.25, 0.25) is False
    assert conflare_keep(0.3, 0.25) is False


def test_conflare_threshold_small_example():
    assert conflare_threshold([0.1, 0.2, 0.3, 0.4], 0.5) == pytest.approx(0.25)
    assert conflare_threshold([0.4, 0.1, 0.3, 0.2], 0.5) == pytest.approx(0.25)  # order does not matter


@pytest.mark.parametrize(
    ("distances", "error_rate", "expected"),
    [
        ([0.1, 0.2, 0.3, INF], 0.1, INF),  # h = 2.7: interpolating towards a miss
        ([0.1, 0.2, 0.3, INF], 0.6, 0.22),  # h = 1.2: both neighbours finite, the miss plays no role
        ([0.1, 0.2, INF], 0.5, 0.2),  # h = 1 exactly: the order statistic itself
        ([0.1, 0.2, INF], 0.25, INF),  # h = 1.5
        ([0.1, INF, INF], 0.25, INF),
    ],
)
def test_conflare_threshold_with_misses_never_nan(distances, error_rate, expected):
    """A miss (+inf) propagates as +inf, never as NaN (a NaN threshold would silently keep nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and numpy's inf - inf RuntimeWarning does not leak
        q = conflare_threshold(distances, error_rate)
    assert not math.isnan(q)
    assert q == pytest.approx(expected)
