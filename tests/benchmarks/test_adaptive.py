"""Pure helpers of ``benchmarks/adaptive.py``: intervals, aggregation, matched-accuracy token ratio (no LLM)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "adaptive.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmark_adaptive", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


bench = _load()


def _o(correct: bool, no_answer: bool = False, ptok: int = 100, calls: int = 1, chunks: int = 1, in_set=None):
    return bench.Outcome(
        answer="x",
        correct=correct,
        no_answer=no_answer,
        prompt_tokens=ptok,
        completion_tokens=3,
        llm_calls=calls,
        chunks=chunks,
        gold_shown=correct,
        gold_in_set=in_set,
    )


def test_wilson_interval_known_values() -> None:
    low, high = bench.wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.2775, abs=1e-4)
    low, high = bench.wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert bench.wilson_interval(0, 0) == (0.0, 1.0)


def test_make_outcome_separates_dont_know_from_hallucination() -> None:
    kw = {"prompt_tokens": 10, "completion_tokens": 2, "llm_calls": 1}
    idk = bench.make_outcome("I don't know.", ["Rollo"], ["d#0"], ["d#1"], **kw)
    wrong = bench.make_outcome("Paris", ["Rollo"], ["d#0"], ["d#0"], **kw)
    right = bench.make_outcome("Rollo the Norse", ["Rollo"], ["d#0"], ["d#0", "d#1"], **kw)
    assert (idk.correct, idk.no_answer, idk.gold_shown) == (False, True, False)
    assert (wrong.correct, wrong.no_answer, wrong.gold_shown) == (False, False, True)
    assert (right.correct, right.no_answer, right.chunks) == (True, False, 2)


def test_aggregate_rates_and_means() -> None:
    outcomes = [
        _o(True, ptok=100, in_set=True),
        _o(False, no_answer=True, ptok=200, calls=2, chunks=2, in_set=True),
        _o(False, ptok=300, calls=3, chunks=4, in_set=False),
        _o(True, ptok=400, in_set=True),
    ]
    row = bench.aggregate(outcomes)
    assert row["n"] == 4
    assert row["accuracy"] == 0.5
    assert row["dont_know_rate"] == 0.25
    assert row["hallucination_rate"] == 0.25
    assert row["prompt_tokens"] == 250
    assert row["completion_tokens"] == 3
    assert row["llm_calls"] == 1.75
    assert row["chunks"] == 2
    assert row["set_coverage"] == 0.75
    assert row["accuracy_low"] < 0.5 < row["accuracy_high"]
    assert bench.aggregate([_o(True), _o(False)])["set_coverage"] is None


def test_paired_noise() -> None:
    assert bench.paired_noise([True, False], [True, False]) == 0.0
    assert bench.paired_noise([True], [False]) == 0.0
    # differences 1, 0, 0, 0: sd 0.5, se 0.25
    assert bench.paired_noise([1, 0, 0, 0], [0, 0, 0, 0], z=1.0) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        bench.paired_noise([True], [True, False])


def test_closest_fixed_skips_strategies_clearly_above_target() -> None:
    n = 40
    target = [True] * 10 + [False] * 30  # 0.25
    correct = {
        "top-1": [True] * 8 + [False] * 32,  # 0.20, eligible
        "top-5": [True] * 40,  # 1.00, far above: not eligible
        "ad": target,
    }
    tokens = {"top-1": 100.0, "top-5": 500.0, "ad": 120.0}
    got = bench.closest_fixed(correct, tokens, ["top-1", "top-5"], "ad")
    assert got["strategy"] == "top-1"
    assert got["gap"] == pytest.approx(-0.05)
    assert got["target_accuracy"] == 0.25
    assert len(correct["top-1"]) == n


def test_closest_fixed_allows_above_within_noise_and_breaks_ties_by_tokens() -> None:
    target = [True, False, True, False]
    correct = {
        "top-1": [True, True, True, False],  # 0.75: one question better, within paired noise
        "top-2": [True, False, True, False],  # equal accuracy, equal gap 0 with top-5
        "top-5": [False, True, True, False],
        "ad": target,
    }
    tokens = {"top-1": 100.0, "top-2": 200.0, "top-5": 150.0, "ad": 100.0}
    assert bench.closest_fixed(correct, tokens, ["top-1", "top-2", "top-5"], "ad")["strategy"] == "top-5"
    only_above = {"top-1": [True] * 30, "ad": [False] * 30}
    assert bench.closest_fixed(only_above, {"top-1": 1.0, "ad": 1.0}, ["top-1"], "ad") is None


def test_headline_ratios() -> None:
    fixed = [bench.fixed_name(k) for k in (1, 5)]
    correct = {
        "top-1": [True, False, False, False],
        "top-5": [True, True, False, False],
        bench.CONFORMAL: [True, True, False, False],
        bench.ADAPTIVE: [True, True, False, False],
    }
    rows = {
        "top-1": {"prompt_tokens": 100.0},
        "top-5": {"prompt_tokens": 600.0},
        bench.CONFORMAL: {"prompt_tokens": 300.0},
        bench.ADAPTIVE: {"prompt_tokens": 150.0},
    }
    got = bench.headline_ratios(rows, correct, fixed)
    assert got["matched_fixed"]["strategy"] == "top-5"
    assert got["vs_matched_fixed"] == pytest.approx(4.0)
    assert got["vs_conformal"] == pytest.approx(2.0)
    assert got["vs_each"]["top-1"] == pytest.approx(100 / 150)
    assert bench.token_ratio(1.0, 0.0) is None


def test_report_text_helpers() -> None:
    outcomes = {
        "top-1": [_o(True), _o(False)],
        bench.CONFORMAL: [_o(True, in_set=True), _o(False, in_set=True)],
        bench.ADAPTIVE: [_o(True, in_set=True), _o(False, no_answer=True, in_set=False)],
    }
    rows = {name: bench.aggregate(v) for name, v in outcomes.items()}
    correct = {name: [o.correct for o in v] for name, v in outcomes.items()}
    ratios = bench.headline_ratios(rows, correct, ["top-1"])
    table = bench.display_rows(rows, ratios)
    assert [r["strategy"] for r in table] == ["top-1", bench.CONFORMAL, bench.ADAPTIVE]
    assert table[0]["set coverage"] == "-"
    assert table[2]["set coverage"] == "0.50"
    lines = bench.ratio_lines(ratios, rows)
    assert "1.00x" in lines[0] and "top-1" in lines[0]
    assert lines[1].startswith("- **Full conformal set / adaptive")
    assert not math.isnan(rows["top-1"]["accuracy"])
