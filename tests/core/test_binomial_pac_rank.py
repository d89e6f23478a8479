"""The O(sqrt(n)) PAC rank gives exactly the rank of the former full-table implementation.

The former ``pac_rank`` (built the whole ``binom_cdf_all`` table) is kept below, verbatim, as the
oracle: its floating-point table defines the answer, including the cases where a CDF value sits
right at ``delta``. No timing is asserted here (numbers come from ``benchmarks/overhead.py``).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from conformal_rag_plugins.core import binomial
from conformal_rag_plugins.core.binomial import binom_cdf_last_at_most
from conformal_rag_plugins.core.quantile import pac_rank

# --- the former implementation, kept as the oracle ------------------------------------------------


def legacy_binom_cdf_all(n: int, p: float) -> np.ndarray:
    """``binom_cdf_all`` as it was when ``pac_rank`` read the whole table."""
    if n < 0:
        raise ValueError("n must be >= 0")
    if p <= 0.0:
        return np.ones(n + 1)
    if p >= 1.0:
        out = np.zeros(n + 1)
        out[-1] = 1.0
        return out
    i = np.arange(n + 1, dtype=float)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log((n - i[1:] + 1) / i[1:]))))
    log_pmf = log_choose + i * math.log(p) + (n - i) * math.log1p(-p)
    top = log_pmf.max()
    pmf = np.exp(log_pmf - top)
    cdf = np.cumsum(pmf) / pmf.sum()
    cdf[-1] = 1.0
    return np.minimum(cdf, 1.0)


def legacy_rank_from_table(cdf: np.ndarray, n: int, delta: float) -> int | None:
    """The former ``pac_rank`` given its table ``cdf = legacy_binom_cdf_all(n, epsilon)``."""
    ok = np.flatnonzero(cdf[:n] <= delta)
    if ok.size == 0:
        return None
    return int(n - ok[-1])


def legacy_pac_rank(n: int, epsilon: float, delta: float) -> int | None:
    """The former ``pac_rank`` (checks of epsilon and delta aside)."""
    if n < 1:
        return None
    return legacy_rank_from_table(legacy_binom_cdf_all(n, epsilon), n, delta)


def exact_last_at_most(n: int, p: float, level: float) -> int:
    """Largest x with P(X <= x) <= level in exact rational arithmetic (p, level as the floats they are)."""
    fp, fl = Fraction(p), Fraction(level)
    total, last = Fraction(0), -1
    for x in range(n + 1):
        total += math.comb(n, x) * fp**x * (1 - fp) ** (n - x)
        if total <= fl:
            last = x
        else:
            break
    return last


EPSILONS = (0.01, 0.05, 0.1, 0.3, 0.5)
DELTAS = (1e-4, 0.01, 0.05, 0.1, 0.5)


def _boundary_deltas(cdf: np.ndarray, n: int) -> list[float]:
    """Deltas at, just below and just above the table's CDF values next to its answer at delta=0.1."""
    k = legacy_rank_from_table(cdf, n, 0.1)
    centre = n - k if k is not None else 0
    out = []
    for x in range(max(0, centre - 1), min(n - 1, centre + 1) + 1):
        v = float(cdf[x])
        if not 0.0 < v < 1.0:
            continue
        out += [v, np.nextafter(v, 0.0), np.nextafter(v, 1.0)]
        out += [v * (1 + r) for r in (1e-15, -1e-15, 1e-12, -1e-12, 1e-9, -1e-9, 1e-6, -1e-6) if 0 < v * (1 + r) < 1]
    return out


# --- the grid: every n from 1 to 2000 -------------------------------------------------------------


@pytest.mark.parametrize("block", range(4))
def test_pac_rank_equals_legacy_for_every_n_up_to_2000(block):
    for n in range(1 + 500 * block, 501 + 500 * block):
        for eps in EPSILONS:
            cdf = legacy_binom_cdf_all(n, eps)
            for delta in DELTAS:
                assert pac_rank(n, eps, delta) == legacy_rank_from_table(cdf, n, delta), (n, eps, delta)


@pytest.mark.parametrize("n", [10**5, 10**5 + 1, 10**6])
@pytest.mark.parametrize(("eps", "delta"), [(0.1, 0.1), (0.05, 0.05), (0.2, 0.01), (0.01, 0.1), (0.5, 0.5)])
def test_pac_rank_equals_legacy_for_large_n(n, eps, delta):
    assert pac_rank(n, eps, delta) == legacy_pac_rank(n, eps, delta)


# --- deltas sitting on the table's CDF values (floating-point ties) -------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20, 22, 50, 99, 100, 101, 500, 1000, 1999, 2000, 10**5])
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.3])
def test_pac_rank_equals_legacy_when_delta_is_on_a_cdf_value(n, eps):
    cdf = legacy_binom_cdf_all(n, eps)
    deltas = _boundary_deltas(cdf, n)
    answers = set()
    for delta in deltas:
        expected = legacy_rank_from_table(cdf, n, delta)
        answers.add(expected)
        assert pac_rank(n, eps, delta) == expected, (n, eps, delta)
    if n >= 20:  # the neighbourhood really straddles the boundary: an off-by-one cannot pass
        assert len(answers) >= 2


def test_pac_rank_equals_legacy_on_cdf_values_at_one_million():
    n, eps = 10**6, 0.1
    cdf = legacy_binom_cdf_all(n, eps)
    k = legacy_rank_from_table(cdf, n, 0.1)
    v = float(cdf[n - k])
    for delta in (v, np.nextafter(v, 0.0), np.nextafter(v, 1.0), v * (1 - 1e-7), v * (1 + 1e-7)):
        assert pac_rank(n, eps, delta) == legacy_rank_from_table(cdf, n, delta), delta


# --- edge cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "eps", "delta"),
    list(
        itertools.product(
            [1, 2, 5, 30, 400],
            [1e-9, 1e-3, 0.5, 0.999, 1 - 1e-9],
            [1e-300, 1e-200, 1e-12, 0.3, 0.999, 1 - 1e-12, 1 - 2**-53],
        )
    ),
)
def test_pac_rank_equals_legacy_at_extremes(n, eps, delta):
    assert pac_rank(n, eps, delta) == legacy_pac_rank(n, eps, delta)


def test_pac_rank_none_and_small_cases_unchanged():
    assert pac_rank(0, 0.1, 0.1) is None
    assert pac_rank(21, 0.1, 0.1) is None
    assert pac_rank(22, 0.1, 0.1) == 22 == legacy_pac_rank(22, 0.1, 0.1)
    assert pac_rank(100, 0.1, 0.1) == 95


# --- the fast path is used, and right on its own ------------------------------------------------------


def test_window_path_answers_without_the_table(monkeypatch):
    """At the benchmark's size the answer comes from the window, not from the full table."""

    def no_table(*args):
        raise AssertionError("the full table was built")

    monkeypatch.setattr(binomial, "_last_in_table", no_table)
    monkeypatch.setattr(binomial, "binom_cdf_all", no_table)
    for n, eps, delta in [(10**6, 0.1, 0.1), (10**5, 0.05, 0.05), (10**6, 0.01, 0.1), (1000, 0.1, 0.1)]:
        assert pac_rank(n, eps, delta) == legacy_pac_rank(n, eps, delta)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 25, 60])
@pytest.mark.parametrize("p", [0.02, 0.1, 0.37, 0.5, 0.9])
@pytest.mark.parametrize("level", [1e-6, 0.01, 0.1, 0.5, 0.95])
def test_window_answer_is_exact_when_it_answers(n, p, level):
    """When the window path answers (no near tie) it is the exact-arithmetic answer too."""
    got = binomial._last_in_window(n, p, level, n)
    if got is not None:
        assert got == exact_last_at_most(n, p, level)
    assert binom_cdf_last_at_most(n, p, level) == int(
        np.flatnonzero(legacy_binom_cdf_all(n, p) <= level)[-1] if (legacy_binom_cdf_all(n, p) <= level).any() else -1
    )


def test_binom_cdf_last_at_most_x_max_and_errors():
    assert binom_cdf_last_at_most(100, 0.1, 0.1, x_max=99) == 5
    assert binom_cdf_last_at_most(100, 0.1, 0.1, x_max=3) == 3
    assert binom_cdf_last_at_most(100, 0.1, 0.1, x_max=-1) == -1
    assert binom_cdf_last_at_most(10, 0.1, 0.1) == -1
    assert binom_cdf_last_at_most(0, 0.1, 0.5) == -1  # P(X <= 0) = 1 > 0.5
    with pytest.raises(ValueError):
        binom_cdf_last_at_most(-1, 0.1, 0.1)
