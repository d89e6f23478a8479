"""End-to-end combination rules: budget splits, thresholds, HMP, decisions, and statistical validity.

The statistical tests simulate exchangeable questions whose retrieval and
generation scores are coupled *adversarially* (the two stages miss on disjoint
questions), so each rule's coverage is close to its bound. That makes the tests
able to fail: each validity check is paired with a check that a wrong rule
(no alpha split, K = 1, the asymptotic HMP threshold, plain conformal instead
of PAC) does fail on the same data.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.clustering import cluster_answers
from conformal_rag_plugins.core.combination import (
    HMP_FACTOR,
    BonferroniThresholds,
    HarmonicMeanRule,
    bonferroni_thresholds,
    decide_end_to_end,
    harmonic_mean_rule,
    hmp_asymptotic_pvalue,
    hmp_asymptotic_threshold,
    pac_thresholds,
    split_budget,
    weighted_harmonic_mean,
)
from conformal_rag_plugins.core.errors import ConformalError, InfiniteThresholdWarning
from conformal_rag_plugins.core.pvalues import conformal_pvalues
from conformal_rag_plugins.core.quantile import conformal_quantile, pac_quantile

ALPHA = 0.1
N_QUESTIONS = 2000
N_SPLITS = 200
N_CAL = 1000

# ----------------------------------------------------------------------------- budget splits


def test_split_budget_defaults_and_remainders():
    assert split_budget(0.1) == (0.05, 0.05)
    assert split_budget(0.1, 0.02) == pytest.approx((0.02, 0.08))
    assert split_budget(0.1, None, 0.09) == pytest.approx((0.01, 0.09))
    assert split_budget(0.1, 0.03, 0.07 + 5e-10) == (0.03, 0.07 + 5e-10)  # within 1e-9


@pytest.mark.parametrize(("ret", "gen"), [(0.05, 0.06), (0.05, 0.04), (0.1, 0.1), (0.05, 0.05 + 2e-9)])
def test_split_budget_must_sum_to_alpha(ret, gen):
    with pytest.raises(ConformalError, match="must equal alpha"):
        split_budget(0.1, ret, gen)


@pytest.mark.parametrize("ret", [0.0, 0.1, 0.2, -0.01, math.nan])
def test_split_budget_parts_inside_open_interval(ret):
    with pytest.raises(ConformalError):
        split_budget(0.1, ret)


def test_bonferroni_uses_conformal_quantile_at_each_level():
    rng = np.random.default_rng(0)
    ret, gen = rng.normal(size=300), -rng.uniform(size=250)
    t = bonferroni_thresholds(ret, gen, 0.1, alpha_ret=0.03)
    assert (t.alpha_ret, t.alpha_gen) == pytest.approx((0.03, 0.07))
    assert t.q_ret == conformal_quantile(ret, 0.03)
    assert t.q_gen == conformal_quantile(gen, 0.07)
    with pytest.raises(ConformalError, match="must equal alpha"):
        bonferroni_thresholds(ret, gen, 0.1, alpha_ret=0.03, alpha_gen=0.06)


def test_bonferroni_keeps_misses_and_warns_when_infinite():
    ret = [0.1] * 15 + [math.inf] * 5
    with pytest.warns(InfiniteThresholdWarning):
        t = bonferroni_thresholds(ret, [-0.5] * 20, 0.1)
    assert t.q_ret == math.inf
    assert bool(t.include(1e9, -0.5))


def test_pac_uses_pac_quantile_at_each_level():
    rng = np.random.default_rng(1)
    ret, gen = rng.normal(size=500), -rng.uniform(size=500)
    t = pac_thresholds(ret, gen, 0.1, 0.1, epsilon_split=(0.04, None), delta_split=(None, 0.02))
    assert (t.epsilon_ret, t.epsilon_gen, t.delta_ret, t.delta_gen) == pytest.approx((0.04, 0.06, 0.08, 0.02))
    assert t.q_ret == pac_quantile(ret, 0.04, 0.08)
    assert t.q_gen == pac_quantile(gen, 0.06, 0.02)
    with pytest.raises(ConformalError, match="delta_ret"):
        pac_thresholds(ret, gen, 0.1, 0.1, delta_split=(0.05, 0.06))


# ----------------------------------------------------------------------------- HMP


def test_weighted_harmonic_mean_formula():
    p_r, p_g = np.array([0.1, 0.5, 1.0]), np.array([0.2, 0.5, 0.01])
    for w in (0.2, 0.5, 0.9):
        expected = 1.0 / (w / p_r + (1 - w) / p_g)
        np.testing.assert_allclose(weighted_harmonic_mean(p_r, p_g, w), expected)
    with pytest.raises(ConformalError):
        weighted_harmonic_mean(0.1, 0.1, 1.0)
    with pytest.raises(ConformalError):
        weighted_harmonic_mean(0.0, 0.1)


def test_hmp_factor_bound_holds():
    """K * HM_w >= min_i p_i / w_i, the inequality behind the finite-sample rule."""
    rng = np.random.default_rng(2)
    p = rng.uniform(1e-4, 1, size=(10000, 2))
    w = rng.uniform(0.01, 0.99, size=10000)
    hm = weighted_harmonic_mean(p[:, 0], p[:, 1], 0.5)
    assert np.all(HMP_FACTOR * hm >= np.minimum(p[:, 0], p[:, 1]) / 0.5 - 1e-12)
    for wi, (a, b) in zip(w[:200], p[:200], strict=True):
        hm_w = float(weighted_harmonic_mean(a, b, wi))
        assert HMP_FACTOR * hm_w >= min(a / wi, b / (1 - wi)) - 1e-12


def test_hmp_rule_uses_conformal_pvalues():
    rng = np.random.default_rng(4)
    ret_cal, gen_cal = rng.normal(size=400), -rng.uniform(size=300)
    rule = harmonic_mean_rule(ret_cal, gen_cal, ALPHA, w_ret=0.3)
    r_ret, r_gen = rng.normal(size=50), -rng.uniform(size=50)
    p_r, p_g = conformal_pvalues(ret_cal, r_ret), conformal_pvalues(gen_cal, r_gen)
    expected = 2 * (1 / (0.3 / p_r + 0.7 / p_g)) > ALPHA
    np.testing.assert_array_equal(rule.include(r_ret, r_gen), expected)
    assert rule.hm_threshold == ALPHA / 2
    assert rule.guarantee == "finite-sample marginal"


def test_hmp_keeps_everything_bonferroni_keeps():
    """The finite-sample HMP rule is a superset of Bonferroni with alpha_ret = w_ret * alpha."""
    rng = np.random.default_rng(5)
    ret_cal, gen_cal = rng.normal(size=500), rng.normal(size=500)
    r_ret, r_gen = rng.normal(size=5000), rng.normal(size=5000)
    for w in (0.2, 0.5, 0.8):
        hmp = harmonic_mean_rule(ret_cal, gen_cal, ALPHA, w_ret=w).include(r_ret, r_gen)
        bonf = bonferroni_thresholds(ret_cal, gen_cal, ALPHA, alpha_ret=w * ALPHA).include(r_ret, r_gen)
        assert np.all(hmp[bonf])
        assert hmp.sum() > bonf.sum()


def test_min_retrieval_pvalue_is_exact_necessary_condition():
    rule = harmonic_mean_rule(np.arange(1000.0), -np.linspace(0, 1, 1000), ALPHA, w_ret=0.4)
    p_min = rule.min_retrieval_pvalue
    assert p_min == pytest.approx(0.4 / (2 / ALPHA - 0.6))
    assert not rule.include_pvalues(p_min * 0.999, 1.0)
    assert rule.include_pvalues(p_min * 1.001, 1.0)
    # retrieval_mask keeps exactly the chunks whose pairs can be included
    r = np.linspace(900, 1000, 500)
    mask = rule.retrieval_mask(r)
    can = rule.include(r, np.full(r.size, -2.0))  # the best possible cluster score (p_gen = 1)
    np.testing.assert_array_equal(mask, can)


def test_asymptotic_threshold_values():
    # Wilson's Landau threshold for L = 2: above alpha / 2 (smaller sets) and below alpha
    t = hmp_asymptotic_threshold(0.1)
    assert t == pytest.approx(0.0783379, abs=1e-6)
    assert 0.05 < t < 0.1
    for alpha in (0.01, 0.05, 0.2):
        t = hmp_asymptotic_threshold(alpha)
        assert alpha / 2 < t < alpha
        assert hmp_asymptotic_pvalue(t) == pytest.approx(alpha, rel=1e-8)
    rule = harmonic_mean_rule([1.0, 2.0, 3.0] * 20, [-0.5] * 60, 0.1, asymptotic=True)
    assert rule.hm_threshold == hmp_asymptotic_threshold(0.1)
    assert "asymptotic" in rule.guarantee and "no finite-sample" in rule.guarantee


def test_asymptotic_pvalue_matches_monte_carlo_for_many_tests():
    """Landau limit of mean(1/p) over L independent uniforms, checked where it is accurate (L = 200)."""
    rng = np.random.default_rng(6)
    L = 200
    stat = (1.0 / rng.uniform(size=(4000, L))).mean(axis=1)
    for q in (0.5, 0.9, 0.99):
        x = float(np.quantile(stat, q))
        assert hmp_asymptotic_pvalue(1.0 / x, L) == pytest.approx(1 - q, abs=0.01 + 0.1 * (1 - q))


def test_asymptotic_pvalue_matches_scipy_landau():
    stats = pytest.importorskip("scipy.stats")
    if not hasattr(stats, "landau"):
        pytest.skip("scipy.stats.landau needs scipy >= 1.15")
    loc = math.log(2) + 1 - 0.5772156649015329 + math.log(math.pi / 2)
    for x in (1.0, 2.5, 10.0, 123.0, 1e4, 1e7):
        expected = stats.landau.sf(x, loc=loc, scale=math.pi / 2)
        assert hmp_asymptotic_pvalue(1 / x, 2) == pytest.approx(expected, rel=1e-8)


# ----------------------------------------------------------------------------- decisions


def _question():
    clusters = {
        "c1": cluster_answers(["Paris"] * 6 + ["Lyon"] * 3 + ["I don't know"], method="exact", chunk_id="c1"),
        "c2": cluster_answers(["Paris"] * 2 + ["Nice"] * 8, method="exact", chunk_id="c2"),
        "c3": cluster_answers(["Rome"] * 10, method="exact", chunk_id="c3"),
    }
    return ["c1", "c2", "c3"], np.array([0.1, 0.3, 0.8]), clusters


def test_decision_with_bonferroni_thresholds():
    ids, r_ret, clusters = _question()
    t = BonferroniThresholds(0.1, 0.05, 0.05, q_ret=0.5, q_gen=-0.25)
    d = decide_end_to_end(t, ids, r_ret, clusters)
    assert d.method == "bonferroni" and d.guarantee == "finite-sample marginal"
    assert d.retrieval_set == ("c1", "c2")
    assert [(p.chunk_id, p.cluster.representative) for p in d.pairs] == [
        ("c1", "Paris"),
        ("c1", "Lyon"),
        ("c2", "Nice"),
    ]
    answers = d.answer_set(method="exact")
    assert [(a.representative, a.confidence, a.chunk_ids) for a in answers] == [
        ("Nice", 0.8, ("c2",)),
        ("Paris", 0.6, ("c1",)),
        ("Lyon", 0.3, ("c1",)),
    ]
    assert not d.abstains


def test_decision_requires_clusters_for_every_retrieved_chunk():
    ids, r_ret, clusters = _question()
    t = BonferroniThresholds(0.1, 0.05, 0.05, q_ret=0.5, q_gen=-0.25)
    del clusters["c2"]
    with pytest.raises(ConformalError, match="c2"):
        decide_end_to_end(t, ids, r_ret, clusters)
    del clusters["c3"]  # outside the retrieval set: may be omitted
    with pytest.raises(ConformalError, match="2 chunk ids but 3"):
        decide_end_to_end(t, ids[:2], r_ret, clusters)


def test_decision_abstains_when_only_idk_survives():
    clusters = {"c": cluster_answers(["I don't know"] * 9 + ["Paris"], method="exact")}
    t = BonferroniThresholds(0.1, 0.05, 0.05, q_ret=1.0, q_gen=-0.5)
    d = decide_end_to_end(t, ["c"], [0.0], clusters)
    assert [p.cluster.abstention for p in d.pairs] == [True]
    assert d.abstains
    assert decide_end_to_end(t, ["c"], [2.0], clusters).abstains  # empty set


def test_decision_with_hmp_matches_vectorised_rule():
    rng = np.random.default_rng(7)
    rule = harmonic_mean_rule(rng.uniform(size=300), -rng.uniform(size=300), ALPHA, w_ret=0.6)
    ids, r_ret, clusters = _question()
    r_ret = np.array([0.2, 0.9, 0.999])
    d = decide_end_to_end(rule, ids, r_ret, clusters)
    assert d.method == "hmp"
    expected = [
        (cid, c.representative)
        for cid, r in zip(ids, r_ret, strict=True)
        if rule.retrieval_mask([r])[0]
        for c in clusters[cid]
        if rule.include(r, c.score)
    ]
    assert [(p.chunk_id, p.cluster.representative) for p in d.pairs] == expected
    assert all(p.p_ret is not None and p.p_gen is not None for p in d.pairs)
    for p in d.pairs:
        assert 2 * weighted_harmonic_mean(p.p_ret, p.p_gen, 0.6) > ALPHA
    d_asym = decide_end_to_end(
        harmonic_mean_rule(rule.ret_calibration, rule.gen_calibration, ALPHA, w_ret=0.6, asymptotic=True),
        ids,
        r_ret,
        clusters,
    )
    assert d_asym.method == "hmp-asymptotic"
    assert len(d_asym.pairs) <= len(d.pairs)


# ----------------------------------------------------------------------------- statistical validity


def _splits(n: int, n_cal: int, n_splits: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n_splits):
        perm = rng.permutation(n)
        yield perm[:n_cal], perm[n_cal:]


def _mean_coverage(make_rule, r_ret, r_gen, seed=0):
    """Mean test coverage of the true pair over random calibration/test splits, and its tolerance."""
    covs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for cal, test in _splits(r_ret.size, N_CAL, N_SPLITS, seed):
            rule = make_rule(r_ret[cal], r_gen[cal])
            covs.append(float(np.mean(rule.include(r_ret[test], r_gen[test]))))
    covs = np.asarray(covs)
    n_test = r_ret.size - N_CAL
    binomial_se = math.sqrt(ALPHA * (1 - ALPHA) / n_test) / math.sqrt(N_SPLITS)
    empirical_se = covs.std(ddof=1) / math.sqrt(N_SPLITS)
    return float(covs.mean()), 3.0 * max(binomial_se, empirical_se)


def _disjoint_miss_scores(seed: int):
    """Retrieval misses when V is small, generation misses when V is large: Bonferroni is tight."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(size=N_QUESTIONS)
    r_ret = 1.0 - v  # e.g. -similarity of the gold chunk
    r_gen = -np.round(1.0 - v, 3)  # -confidence, with ties
    r_ret[v < 0.01] = math.inf  # gold chunk outside the pool: kept as a miss
    r_gen[v > 0.99] = math.inf  # LLM never right: kept as a miss
    return r_ret, r_gen


def _worst_case_hmp_pvalues(v: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Uniform (p1, p2) coupled so that 1/p1 + 1/p2 >= 1/b on a set of probability 4b (see harmonic_mean_rule)."""
    p1, p2 = np.empty_like(v), np.empty_like(v)
    a = v < b
    p1[a], p2[a] = v[a], 1 - v[a]
    bb = (v >= b) & (v < 2 * b)
    p2[bb], p1[bb] = v[bb] - b, 1 - v[bb]
    c = (v >= 2 * b) & (v < 4 * b)
    p1[c], p2[c] = v[c] - b, 5 * b - v[c]
    d = v >= 4 * b
    p2[d] = v[d] - b
    p1[d] = np.where(v[d] - b < 1 - 2 * b, v[d] - b, v[d])
    return p1, p2


def test_bonferroni_end_to_end_coverage_is_valid_and_tight():
    r_ret, r_gen = _disjoint_miss_scores(10)
    cov, tol = _mean_coverage(lambda a, b: bonferroni_thresholds(a, b, ALPHA), r_ret, r_gen)
    assert cov >= 1 - ALPHA - tol, (cov, tol)
    # tight on this adversarial coupling: at most 1 - alpha + 2/(n+1) (+ ties)
    assert cov <= 1 - ALPHA + 2 / (N_CAL + 1) + 0.005 + tol, (cov, tol)
    # an uneven split is valid too
    cov2, tol2 = _mean_coverage(lambda a, b: bonferroni_thresholds(a, b, ALPHA, alpha_ret=0.02), r_ret, r_gen)
    assert cov2 >= 1 - ALPHA - tol2
    # power: without the split (alpha per stage) coverage drops to about 1 - 2 alpha
    naive, _ = _mean_coverage(
        lambda a, b: BonferroniThresholds(
            ALPHA, ALPHA, ALPHA, conformal_quantile(a, ALPHA), conformal_quantile(b, ALPHA)
        ),
        r_ret,
        r_gen,
    )
    assert naive < 1 - ALPHA - 10 * tol


def test_bonferroni_valid_with_independent_stages():
    rng = np.random.default_rng(11)
    r_ret = rng.gamma(2.0, size=N_QUESTIONS)
    r_gen = -rng.integers(0, 11, size=N_QUESTIONS) / 10.0  # -k/M with M = 10
    r_gen[r_gen == 0] = math.inf  # no correct cluster
    cov, tol = _mean_coverage(lambda a, b: bonferroni_thresholds(a, b, ALPHA), r_ret, r_gen)
    assert cov >= 1 - ALPHA - tol


def test_hmp_finite_sample_rule_is_valid_under_worst_case_dependence():
    rng = np.random.default_rng(12)
    p1, p2 = _worst_case_hmp_pvalues(rng.uniform(size=N_QUESTIONS), ALPHA / 4)  # sharp for K = 2
    r_ret, r_gen = -p1, -p2  # conformal p-values of these scores estimate p1, p2
    cov, tol = _mean_coverage(lambda a, b: harmonic_mean_rule(a, b, ALPHA), r_ret, r_gen)
    assert cov >= 1 - ALPHA - tol, (cov, tol)
    assert cov <= 1 - ALPHA + 0.02, cov  # close to the bound: the factor K = 2 is not slack here


def test_hmp_without_factor_two_is_invalid():
    """Power: K = 1 (HM_w > alpha) under-covers on a coupling built against it; K = 2 stays valid."""
    rng = np.random.default_rng(13)
    p1, p2 = _worst_case_hmp_pvalues(rng.uniform(size=N_QUESTIONS), 0.9 * ALPHA / 2)
    r_ret, r_gen = -p1, -p2
    k1, tol = _mean_coverage(
        lambda a, b: HarmonicMeanRule(ALPHA, 0.5, False, ALPHA, np.sort(a), np.sort(b)), r_ret, r_gen
    )
    assert k1 < 1 - ALPHA - 3 * tol, (k1, tol)  # about 1 - 1.8 alpha
    cov, tol = _mean_coverage(lambda a, b: harmonic_mean_rule(a, b, ALPHA), r_ret, r_gen)
    assert cov >= 1 - ALPHA - tol


def test_asymptotic_hmp_is_not_finite_sample_valid():
    """Wilson's threshold under-covers on a coupling built against it; the K = 2 rule stays valid."""
    rng = np.random.default_rng(14)
    p1, p2 = _worst_case_hmp_pvalues(rng.uniform(size=N_QUESTIONS), 0.9 * hmp_asymptotic_threshold(ALPHA) / 2)
    r_ret, r_gen = -p1, -p2
    asym, tol = _mean_coverage(lambda a, b: harmonic_mean_rule(a, b, ALPHA, asymptotic=True), r_ret, r_gen)
    assert asym < 1 - ALPHA - 3 * tol, (asym, tol)  # about 1 - 1.8 * 0.078
    cov, tol = _mean_coverage(lambda a, b: harmonic_mean_rule(a, b, ALPHA), r_ret, r_gen)
    assert cov >= 1 - ALPHA - tol


def test_hmp_valid_with_unequal_weights_and_independent_stages():
    rng = np.random.default_rng(18)
    r_ret, r_gen = rng.normal(size=N_QUESTIONS), rng.normal(size=N_QUESTIONS)
    for w in (0.2, 0.8):
        cov, tol = _mean_coverage(lambda a, b, w=w: harmonic_mean_rule(a, b, ALPHA, w_ret=w), r_ret, r_gen)
        assert cov >= 1 - ALPHA - tol


def _disjoint_true_coverage(q_ret: float, q_gen: float) -> float:
    """Exact coverage of the population behind _disjoint_miss_scores (without rounding) at thresholds."""
    lower = 0.0 if math.isinf(q_ret) else max(1.0 - q_ret, 0.01)
    upper = 1.0 if math.isinf(q_gen) else min(q_gen, 0.99)
    return max(0.0, upper - lower)


def test_pac_coverage_holds_in_most_calibration_draws():
    eps, delta, reps = 0.1, 0.1, 300
    rng = np.random.default_rng(15)
    ok_pac, ok_plain = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for _ in range(reps):
            v = rng.uniform(size=N_QUESTIONS)[:N_CAL]  # a fresh exchangeable calibration draw
            r_ret, r_gen = 1.0 - v, v.copy()
            r_ret[v < 0.01] = math.inf
            r_gen[v > 0.99] = math.inf
            t = pac_thresholds(r_ret, r_gen, eps, delta)
            ok_pac.append(_disjoint_true_coverage(t.q_ret, t.q_gen) >= 1 - eps)
            b = bonferroni_thresholds(r_ret, r_gen, eps)  # marginal, not PAC
            ok_plain.append(_disjoint_true_coverage(b.q_ret, b.q_gen) >= 1 - eps)
    tol = 3 * math.sqrt(delta * (1 - delta) / reps)
    assert np.mean(ok_pac) >= 1 - delta - tol, np.mean(ok_pac)
    # power: marginal (non-PAC) thresholds reach 1 - eps in only about half of the draws
    assert np.mean(ok_plain) < 1 - delta - tol


def test_pac_empirical_coverage_over_random_splits():
    """Per-draw test coverage (a large fresh test sample each time) reaches 1 - eps in >= 1 - delta of the draws.

    The test sample is large enough (50,000) that its own noise (3 sd = 0.004) is far below the PAC
    margin, so marginal Bonferroni thresholds, right only on average, fail the same check.
    """
    eps, delta, reps, n_test = 0.1, 0.1, 300, 50_000
    rng = np.random.default_rng(17)
    slack = 3 * math.sqrt(eps * (1 - eps) / n_test)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        v = rng.uniform(size=n)
        r_ret, r_gen = 1.0 - v, -np.round(1.0 - v, 3)
        r_ret[v < 0.01] = math.inf
        r_gen[v > 0.99] = math.inf
        return r_ret, r_gen

    pac_ok, plain_ok = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for _ in range(reps):
            cal_ret, cal_gen = draw(N_CAL)
            test_ret, test_gen = draw(n_test)
            pac = pac_thresholds(cal_ret, cal_gen, eps, delta)
            pac_ok.append(np.mean(pac.include(test_ret, test_gen)) >= 1 - eps - slack)
            plain = bonferroni_thresholds(cal_ret, cal_gen, eps)
            plain_ok.append(np.mean(plain.include(test_ret, test_gen)) >= 1 - eps - slack)
    tol = 3 * math.sqrt(delta * (1 - delta) / reps)
    assert np.mean(pac_ok) >= 1 - delta - tol, np.mean(pac_ok)
    # negative control: Bonferroni without PAC is right on average only, so it fails this check
    assert np.mean(plain_ok) < 1 - delta - tol, np.mean(plain_ok)
