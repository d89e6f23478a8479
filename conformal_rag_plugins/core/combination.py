"""End-to-end answer sets: combining the retrieval and generation stages.

A set holds (chunk, answer-cluster) pairs; it covers when the true pair (gold chunk, a cluster
matching a reference) is included. Rules: Bonferroni (TRAQ, :func:`bonferroni_thresholds`,
union bound, finite-sample under any dependence), PAC (:func:`pac_thresholds`) and the weighted
harmonic-mean p-value (TRAC, :func:`harmonic_mean_rule`: finite-sample with ``K = 2``; Wilson's
Landau threshold, ``asymptotic=True``, is only asymptotically valid). Thresholds all come from
:mod:`.quantile`, p-values from :func:`~.pvalues.conformal_pvalues`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .clustering import AnswerCluster, Method, merge_clusters
from .errors import ConformalError
from .pvalues import conformal_pvalues
from .quantile import conformal_quantile, pac_quantile
from .validation import check_alpha, check_scores

HMP_FACTOR = 2
"""``K``, the number of combined stages: the finite-sample HMP rule is ``K * HM_w > alpha``."""

_SUM_TOLERANCE = 1e-9

StageSplit = tuple[float | None, float | None]
"""A budget's ``(retrieval part, generation part)``; ``None`` for a part taken as the remainder."""


def split_budget(
    total: float, ret: float | None = None, gen: float | None = None, *, name: str = "alpha"
) -> tuple[float, float]:
    """Split a budget: equal by default, one part given means the other is the remainder, both must sum to ``total``.

    Examples
    --------
    >>> split_budget(0.1, 0.03)
    (0.03, 0.07)
    >>> split_budget(0.1, 0.05, 0.06)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: alpha_ret + alpha_gen = 0.11 must equal alpha = 0.1 ...
    """
    total = check_alpha(total, name)
    if ret is None and gen is None:
        ret = gen = total / 2.0
    elif ret is None:
        gen = float(gen)  # type: ignore[arg-type]
        ret = total - gen
    elif gen is None:
        ret = float(ret)
        gen = total - ret
    else:
        ret, gen = float(ret), float(gen)
        if abs(ret + gen - total) > _SUM_TOLERANCE:
            raise ConformalError(
                f"{name}_ret + {name}_gen = {ret + gen:.10g} must equal {name} = {total:.10g} (within 1e-9); "
                f"the union bound only gives 1 - ({name}_ret + {name}_gen). Pass one part and let the other "
                "be the remainder."
            )
    for part, value in ((f"{name}_ret", ret), (f"{name}_gen", gen)):
        if not (0.0 < value < total) or math.isnan(value):
            raise ConformalError(f"{part} must lie strictly between 0 and {name} = {total}, got {value!r}.")
    return float(ret), float(gen)


def _as_array(values: Sequence[float] | np.ndarray | float) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if np.isnan(arr).any():
        raise ConformalError("Nonconformity scores and p-values must not be NaN.")
    return arr


# --------------------------------------------------------------------------- threshold rules


def _infinite_reason(q_ret: float, q_gen: float) -> str:
    stages = [name for name, q in (("retrieval", q_ret), ("generator", q_gen)) if not math.isfinite(q)]
    if not stages:
        return ""
    return (
        f"The {' and '.join(stages)} threshold is +inf: the set keeps every candidate of that stage, but a "
        "miss there (gold chunk outside the pool, or no correct sampled answer) cannot be in any set, so "
        "coverage 1 - alpha is not guaranteed. A stage that misses more often than its miss bound (half its "
        "alpha unless set) keeps +inf: use more calibration questions, a larger pool, a stronger LLM, a larger "
        "alpha, or a miss bound chosen on held-out questions."
    )


class _StageThresholds:
    """Shared by the threshold rules: the retrieval mask, the pair test and the guarantee flag."""

    q_ret: float
    q_gen: float

    @property
    def guaranteed(self) -> bool:
        """False when a stage threshold is ``+inf``: a miss in that stage would then count as kept."""
        return math.isfinite(self.q_ret) and math.isfinite(self.q_gen)

    @property
    def reason(self) -> str:
        """Why the set is not guaranteed (empty when it is)."""
        return _infinite_reason(self.q_ret, self.q_gen)

    def retrieval_mask(self, r_ret: Sequence[float] | np.ndarray) -> np.ndarray:
        """Chunks kept by the retrieval stage (``r_ret <= q_ret``)."""
        return _as_array(r_ret) <= self.q_ret

    def include(
        self, r_ret: Sequence[float] | np.ndarray | float, r_gen: Sequence[float] | np.ndarray | float
    ) -> np.ndarray:
        """Elementwise: is the pair (chunk score ``r_ret``, cluster score ``r_gen``) in the set?"""
        return (_as_array(r_ret) <= self.q_ret) & (_as_array(r_gen) <= self.q_gen)


@dataclass(frozen=True)
class BonferroniThresholds(_StageThresholds):
    """Bonferroni thresholds: ``conformal_quantile`` of each stage at ``alpha_ret + alpha_gen = alpha``.

    Examples
    --------
    >>> t = BonferroniThresholds(0.1, 0.05, 0.05, q_ret=-0.5, q_gen=-0.3)
    >>> t.include([-0.6, -0.6, -0.4], [-0.4, -0.2, -0.9]).tolist()
    [True, False, False]
    """

    alpha: float
    alpha_ret: float
    alpha_gen: float
    q_ret: float
    q_gen: float
    method: str = field(default="bonferroni", init=False)
    guarantee: str = field(default="finite-sample marginal", init=False)


@dataclass(frozen=True)
class PACThresholds(_StageThresholds):
    """PAC thresholds: miscoverage ``<= epsilon`` with probability ``>= 1 - delta``.

    Examples
    --------
    >>> t = PACThresholds(0.1, 0.1, 0.05, 0.05, 0.05, 0.05, q_ret=1.0, q_gen=-0.2)
    >>> bool(t.include(1.0, -0.2))
    True
    """

    epsilon: float
    delta: float
    epsilon_ret: float
    epsilon_gen: float
    delta_ret: float
    delta_gen: float
    q_ret: float
    q_gen: float
    method: str = field(default="pac", init=False)
    guarantee: str = field(default="PAC (training-conditional)", init=False)


def bonferroni_thresholds(
    ret_scores: Sequence[float] | np.ndarray,
    gen_scores: Sequence[float] | np.ndarray,
    alpha: float,
    *,
    alpha_ret: float | None = None,
    alpha_gen: float | None = None,
    strict: bool = False,
    miss_bounds: StageSplit = (None, None),
) -> BonferroniThresholds:
    """TRAQ's thresholds: ``P(a correct answer is in the set) >= 1 - alpha`` by the union bound.

    Scores: retrieval (gold chunk, ``+inf`` for a miss) and generation; the split is as in
    :func:`split_budget`; ``strict`` raises instead of returning ``+inf``. ``miss_bounds`` are the
    stages' pool-miss bounds (``miss_bound`` of :func:`~.quantile.conformal_quantile`; ``None``: half
    the stage's alpha): each must be fixed without the calibration questions (a held-out split).

    Examples
    --------
    >>> t = bonferroni_thresholds([0.1 * i for i in range(1, 40)], [-0.1] * 39, 0.1)
    >>> round(t.q_ret, 1), t.q_gen, t.alpha_ret
    (3.9, -0.1, 0.05)
    """
    a_ret, a_gen = split_budget(alpha, alpha_ret, alpha_gen, name="alpha")
    return BonferroniThresholds(
        alpha=float(alpha),
        alpha_ret=a_ret,
        alpha_gen=a_gen,
        q_ret=conformal_quantile(ret_scores, a_ret, strict=strict, miss_bound=miss_bounds[0]),
        q_gen=conformal_quantile(gen_scores, a_gen, strict=strict, miss_bound=miss_bounds[1]),
    )


def pac_thresholds(
    ret_scores: Sequence[float] | np.ndarray,
    gen_scores: Sequence[float] | np.ndarray,
    epsilon: float,
    delta: float,
    *,
    epsilon_split: StageSplit = (None, None),
    delta_split: StageSplit = (None, None),
    strict: bool = False,
    miss_bounds: StageSplit = (None, None),
) -> PACThresholds:
    """PAC end-to-end thresholds: ``eps_ret + eps_gen = eps`` and ``delta_ret + delta_gen = delta``.

    Each stage gets :func:`~.quantile.pac_quantile` at its ``(eps_i, delta_i)``; the union bound over
    the calibration failures and the test-time misses gives ``P(miscoverage > eps) <= delta``. Splits
    are as in :func:`split_budget`; ``miss_bounds`` as in :func:`bonferroni_thresholds`.

    Examples
    --------
    >>> t = pac_thresholds([i / 400 for i in range(1, 401)], [-0.5] * 400, 0.1, 0.1)
    >>> (t.epsilon_ret, t.delta_gen), round(t.q_ret, 4)
    ((0.05, 0.05), 0.99)
    >>> round(pac_thresholds([0.5] * 400, [-0.5] * 400, 0.1, 0.1, epsilon_split=(0.04, None)).epsilon_gen, 9)
    0.06
    """
    e_ret, e_gen = split_budget(epsilon, *epsilon_split, name="epsilon")
    d_ret, d_gen = split_budget(delta, *delta_split, name="delta")
    return PACThresholds(
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_ret=e_ret,
        epsilon_gen=e_gen,
        delta_ret=d_ret,
        delta_gen=d_gen,
        q_ret=pac_quantile(ret_scores, e_ret, d_ret, strict=strict, miss_bound=miss_bounds[0]),
        q_gen=pac_quantile(gen_scores, e_gen, d_gen, strict=strict, miss_bound=miss_bounds[1]),
    )


# --------------------------------------------------------------------------- harmonic-mean p-value


def weighted_harmonic_mean(
    p_ret: Sequence[float] | np.ndarray | float, p_gen: Sequence[float] | np.ndarray | float, w_ret: float = 0.5
) -> np.ndarray:
    """``HM_w = 1 / (w_ret / p_ret + w_gen / p_gen)`` with ``w_gen = 1 - w_ret``.

    Examples
    --------
    >>> round(float(weighted_harmonic_mean(0.1, 1.0, w_ret=0.5)), 4)
    0.1818
    """
    w = _check_weight(w_ret)
    p_r, p_g = _as_array(p_ret), _as_array(p_gen)
    if (p_r <= 0).any() or (p_g <= 0).any() or (p_r > 1).any() or (p_g > 1).any():
        raise ConformalError("p-values must lie in (0, 1].")
    return 1.0 / (w / p_r + (1.0 - w) / p_g)


def _check_weight(w_ret: float) -> float:
    w = float(w_ret)
    if not (0.0 < w < 1.0):
        raise ConformalError(f"w_ret must lie strictly between 0 and 1 (w_gen = 1 - w_ret), got {w_ret!r}.")
    return w


_EULER_GAMMA = 0.5772156649015329
_LANDAU_LOCATION = 1.0 - _EULER_GAMMA + math.log(math.pi / 2.0)  # 0.8743670..., Wilson's 0.874
_LANDAU_SCALE = math.pi / 2.0
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(20)


def _stable_sf(z: float) -> float:
    """``P(Z > z)`` for the standard maximally skewed 1-stable law (alpha=1, beta=1, sigma=1, mu=0).

    Nolan's (1997) integral, written in ``phi = pi/2 - theta``::

        P(Z > z) = (1/pi) * int_0^pi (1 - exp(-exp(l(phi)))) dphi,
        l(phi) = -pi z / 2 + log(2/pi) + log(pi - phi) - log(sin phi) + (pi - phi) cot(phi),

    by Gauss-Legendre on panels refined geometrically around the root of ``l`` (where the integrand
    jumps from ~1 to ~0).
    """

    def ell(phi: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            a = math.pi - phi
            return (
                -math.pi * z / 2.0
                + math.log(2.0 / math.pi)
                + np.log(a)
                - np.log(np.sin(phi))
                + a * np.cos(phi) / np.sin(phi)
            )

    def ell_scalar(phi: float) -> float:
        a = math.pi - phi
        s = math.sin(phi)
        return -math.pi * z / 2.0 + math.log(2.0 / math.pi) + math.log(a) - math.log(s) + a * math.cos(phi) / s

    # l is decreasing in phi, from +inf (phi -> 0) to -pi z / 2 + log(2/pi) - 1 (phi -> pi).
    if -math.pi * z / 2.0 + math.log(2.0 / math.pi) - 1.0 >= 0.0:
        breaks = np.linspace(0.0, math.pi, 17)
    else:
        lo, hi = 0.0, math.pi
        for _ in range(400):
            mid = 0.5 * (lo + hi) if lo > 0 else hi / 2.0
            if mid <= 0.0 or mid in (lo, hi):
                break
            if ell_scalar(mid) > 0:
                lo = mid
            else:
                hi = mid
        star = 0.5 * (lo + hi)
        offsets = star * 2.0 ** -np.arange(0, 60)
        pts = [0.0, math.pi, star]
        pts += list(star - offsets[1:]) + list(star + offsets)
        pts += list(star * 2.0 ** np.arange(2, 120))
        breaks = np.unique(np.clip(np.asarray(pts), 0.0, math.pi))
    a, b = breaks[:-1], breaks[1:]
    half = (b - a) / 2.0
    phi = (a + b)[:, None] / 2.0 + half[:, None] * _GL_NODES[None, :]
    with np.errstate(over="ignore"):
        integrand = -np.expm1(-np.exp(ell(phi)))
    integrand = np.nan_to_num(integrand, nan=1.0)
    total = float(np.sum(half[:, None] * _GL_WEIGHTS[None, :] * integrand))
    return min(1.0, max(0.0, total / math.pi))


def hmp_asymptotic_pvalue(hm: float, n_tests: int = 2) -> float:
    """Wilson's asymptotic HMP p-value, as TRAC used it: **no finite-sample guarantee**.

    ``P(X >= 1 / hm)`` with ``X ~ Landau(log(L) + 0.874, pi/2)``, the stable limit of ``mean(1/p_i)``.

    Examples
    --------
    >>> round(hmp_asymptotic_pvalue(0.05), 4)
    0.0601
    """
    if not (0.0 < hm <= 1.0):
        raise ConformalError(f"The harmonic mean p-value must lie in (0, 1], got {hm!r}.")
    loc = math.log(n_tests) + _LANDAU_LOCATION
    return _stable_sf((1.0 / hm - loc) / _LANDAU_SCALE)


@functools.lru_cache(maxsize=256)
def hmp_asymptotic_threshold(alpha: float, n_tests: int = 2) -> float:
    """Wilson's asymptotic HMP threshold ``alpha_L``: reject when ``HM_w <= alpha_L``.

    ``1 / x`` with ``x`` the ``1 - alpha`` Landau quantile; larger than ``alpha / L`` (smaller sets)
    but only asymptotically valid.

    Examples
    --------
    >>> round(hmp_asymptotic_threshold(0.1), 4)
    0.0783
    """
    alpha = check_alpha(alpha)
    if int(n_tests) < 1:
        raise ConformalError(f"n_tests must be >= 1, got {n_tests!r}.")
    loc = math.log(int(n_tests)) + _LANDAU_LOCATION

    def sf(x: float) -> float:
        return _stable_sf((x - loc) / _LANDAU_SCALE)

    lo, hi = loc - 20.0, loc + 2.0 / alpha
    while sf(hi) > alpha:
        hi = loc + 2.0 * (hi - loc)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sf(mid) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, abs(hi)):
            break
    return 1.0 / hi


@dataclass(frozen=True)
class HarmonicMeanRule:
    """TRAC's rule (built by :func:`harmonic_mean_rule`): include a pair iff ``HM_w > hm_threshold``."""

    alpha: float
    w_ret: float
    asymptotic: bool
    hm_threshold: float
    ret_calibration: np.ndarray = field(repr=False, compare=False)
    gen_calibration: np.ndarray = field(repr=False, compare=False)
    method: str = field(default="hmp", init=False)

    @property
    def guarantee(self) -> str:
        """``"finite-sample marginal"`` or ``"asymptotic (Wilson 2019), no finite-sample guarantee"``."""
        if self.asymptotic:
            return "asymptotic (Wilson 2019), no finite-sample guarantee"
        return "finite-sample marginal"

    @property
    def min_retrieval_pvalue(self) -> float:
        """Chunks with ``p_ret`` at or below this cannot contribute any answer (even with ``p_gen = 1``)."""
        room = 1.0 / self.hm_threshold - (1.0 - self.w_ret)
        return self.w_ret / room if room > 0 else math.inf

    @property
    def miss_pvalues(self) -> tuple[float, float]:
        """Each stage's p-value of a missed (``+inf``) score: ``(1 + m) / (n + 1)``, ``m`` its calibration misses."""
        return (
            float(self.retrieval_pvalues([math.inf])[0]),
            float(self.generation_pvalues([math.inf])[0]),
        )

    @property
    def guaranteed(self) -> bool:
        """Whether the rule would reject every pair with a missed stage anyway.

        The proof assumes the true pair is a candidate; a missed stage can never be in the set, so the
        bound holds only if the rule rejects a miss even with the other p-value at 1: for the finite-sample
        rule ``(1 + m_ret) / (n + 1) <= w_ret alpha / (2 - w_gen alpha)`` and symmetrically (checked
        with the rule itself, not the algebra).
        """
        p_ret_miss, p_gen_miss = self.miss_pvalues
        return not (bool(self.include_pvalues(p_ret_miss, 1.0)) or bool(self.include_pvalues(1.0, p_gen_miss)))

    @property
    def reason(self) -> str:
        """Why the set is not guaranteed (empty when it is)."""
        p_ret_miss, p_gen_miss = self.miss_pvalues
        stages = []
        if bool(self.include_pvalues(p_ret_miss, 1.0)):
            stages.append(f"retrieval (miss p-value {p_ret_miss:.3g})")
        if bool(self.include_pvalues(1.0, p_gen_miss)):
            stages.append(f"generator (miss p-value {p_gen_miss:.3g})")
        if not stages:
            return ""
        return (
            f"The harmonic-mean rule would accept a missed {' and '.join(stages)} pair at alpha={self.alpha:g}, "
            "but a miss cannot be in any set: coverage 1 - alpha is not guaranteed (the HMP analogue of a +inf "
            "threshold). Use more calibration questions, a larger pool, a stronger LLM or a larger alpha."
        )

    def retrieval_pvalues(self, r_ret: Sequence[float] | np.ndarray | float) -> np.ndarray:
        """Conformal p-values of chunk nonconformity scores."""
        return conformal_pvalues(self.ret_calibration, np.atleast_1d(_as_array(r_ret)))

    def generation_pvalues(self, r_gen: Sequence[float] | np.ndarray | float) -> np.ndarray:
        """Conformal p-values of cluster scores (``-confidence``)."""
        return conformal_pvalues(self.gen_calibration, np.atleast_1d(_as_array(r_gen)))

    def retrieval_mask(self, r_ret: Sequence[float] | np.ndarray) -> np.ndarray:
        """Chunks that can contribute an answer (a superset: the pair rule decides)."""
        return self.retrieval_pvalues(r_ret) > self.min_retrieval_pvalue * (1.0 - 1e-12)

    def include_pvalues(
        self, p_ret: Sequence[float] | np.ndarray | float, p_gen: Sequence[float] | np.ndarray | float
    ) -> np.ndarray:
        """Elementwise decision from p-values: ``HM_w > hm_threshold``."""
        return weighted_harmonic_mean(p_ret, p_gen, self.w_ret) > self.hm_threshold

    def include(
        self, r_ret: Sequence[float] | np.ndarray | float, r_gen: Sequence[float] | np.ndarray | float
    ) -> np.ndarray:
        """Elementwise: is the pair (chunk score ``r_ret``, cluster score ``r_gen``) in the set?"""
        shape = np.broadcast(_as_array(r_ret), _as_array(r_gen)).shape
        p_r = self.retrieval_pvalues(np.ravel(r_ret)).reshape(np.shape(r_ret))
        p_g = self.generation_pvalues(np.ravel(r_gen)).reshape(np.shape(r_gen))
        return np.broadcast_to(self.include_pvalues(p_r, p_g), shape)


def harmonic_mean_rule(
    ret_scores: Sequence[float] | np.ndarray,
    gen_scores: Sequence[float] | np.ndarray,
    alpha: float,
    *,
    w_ret: float = 0.5,
    asymptotic: bool = False,
) -> HarmonicMeanRule:
    """TRAC's weighted harmonic-mean p-value rule: include a pair iff ``K * HM_w > alpha``, ``K = 2``.

    **Valid under any dependence.** ``1 / HM_w = sum_i w_i / p_i <= K max_i (w_i / p_i)``, so exclusion
    implies ``p_i <= w_i alpha`` for some ``i``; conformal p-values are super-uniform, so
    ``P(excluded) <= sum_i w_i alpha = alpha``. **K = 2 is tight:** with equal weights, coupling two
    uniform p-values so a small one comes with a large one (``p_gen = 4b - p_ret`` on ``[b, 3b]``,
    ``b = alpha / (2c)``) excludes with probability ``2 alpha / c > alpha`` for any factor ``c < 2``
    (simulated in ``tests/core/test_combination.py``).
    **Cost:** sets are never smaller than Bonferroni's with ``alpha_ret = w_ret * alpha``.
    ``asymptotic=True`` uses Wilson's Landau threshold (:func:`hmp_asymptotic_threshold`, about
    0.078 at ``alpha = 0.1``), as TRAC did: not finite-sample valid for ``L = 2``.
    ``w_ret`` lies in (0, 1) and ``w_gen = 1 - w_ret``; ``+inf`` misses stay in the scores.

    Examples
    --------
    >>> rule = harmonic_mean_rule(list(range(1, 100)), [-(i / 100) for i in range(1, 100)], 0.1)
    >>> rule.hm_threshold
    0.05
    >>> rule.include([1.0, 200.0], [-0.9, -0.9]).tolist()
    [True, False]
    """
    alpha = check_alpha(alpha)
    w = _check_weight(w_ret)
    threshold = hmp_asymptotic_threshold(alpha, 2) if asymptotic else alpha / HMP_FACTOR
    return HarmonicMeanRule(
        alpha=alpha,
        w_ret=w,
        asymptotic=bool(asymptotic),
        hm_threshold=float(threshold),
        ret_calibration=np.sort(check_scores(ret_scores)),
        gen_calibration=np.sort(check_scores(gen_scores)),
    )


# --------------------------------------------------------------------------- per-question decision

Rule = BonferroniThresholds | PACThresholds | HarmonicMeanRule


@dataclass(frozen=True)
class IncludedPair:
    """One (chunk, answer cluster) pair in the end-to-end set, with its p-values for HMP."""

    chunk_id: str
    cluster: AnswerCluster
    p_ret: float | None = None
    p_gen: float | None = None


@dataclass(frozen=True)
class EndToEndDecision:
    """Which (chunk, answer-cluster) pairs a question's answer set includes.

    ``method`` is ``"bonferroni"``, ``"pac"``, ``"hmp"`` or ``"hmp-asymptotic"``; ``retrieval_set``
    holds the chunks the retrieval stage kept (for HMP, those that could contribute); ``pairs`` are
    in retrieval then cluster order; ``guaranteed`` is False when a missed stage would not be rejected.

    Examples
    --------
    >>> from conformal_rag_plugins.core.clustering import cluster_answers
    >>> t = BonferroniThresholds(0.1, 0.05, 0.05, q_ret=0.5, q_gen=-0.25)
    >>> cl = {"c1": cluster_answers(["Paris", "Paris", "Lyon", "Nice"], method="exact")}
    >>> d = decide_end_to_end(t, ["c1", "c2"], [0.2, 0.9], cl)
    >>> d.retrieval_set, [p.cluster.representative for p in d.pairs]
    (('c1',), ['Paris', 'Lyon', 'Nice'])
    >>> [(a.representative, a.chunk_ids) for a in d.answer_set(method="exact")]
    [('Paris', ('c1',)), ('Lyon', ('c1',)), ('Nice', ('c1',))]
    """

    method: str
    guarantee: str
    retrieval_set: tuple[str, ...]
    pairs: tuple[IncludedPair, ...]
    guaranteed: bool = True
    reason: str = ""

    def by_chunk(self) -> dict[str, list[AnswerCluster]]:
        """Included clusters per chunk (every retrieval-set chunk appears, maybe with none)."""
        out: dict[str, list[AnswerCluster]] = {cid: [] for cid in self.retrieval_set}
        for p in self.pairs:
            out.setdefault(p.chunk_id, []).append(p.cluster)
        return out

    def answer_set(
        self,
        *,
        method: Method = "rougeL",
        tau: float | None = None,
        embed: Callable[[list[str]], np.ndarray] | None = None,
    ) -> list[AnswerCluster]:
        """The de-duplicated answer set (:func:`~.clustering.merge_clusters` of the pairs)."""
        return merge_clusters(self.by_chunk(), method=method, tau=tau, embed=embed)

    @property
    def abstains(self) -> bool:
        """True when the set is empty or holds only "I don't know" clusters."""
        return all(p.cluster.abstention for p in self.pairs)


def decide_end_to_end(
    rule: Rule,
    chunk_ids: Sequence[str],
    ret_nonconformity: Sequence[float] | np.ndarray,
    clusters_by_chunk: Mapping[str, Sequence[AnswerCluster]],
) -> EndToEndDecision:
    """Apply a combination rule to one question's candidate chunks (best first) and their clusters.

    ``ret_nonconformity`` is each candidate's score as if it were gold
    (:func:`~.retrieval_scores.candidate_nonconformity`). ``clusters_by_chunk`` must hold every chunk
    passing ``rule.retrieval_mask``; others may be omitted (they need no LLM call).
    """
    ids = [str(c) for c in chunk_ids]
    r_ret = _as_array(ret_nonconformity)
    if r_ret.shape != (len(ids),):
        raise ConformalError(f"Got {len(ids)} chunk ids but {r_ret.size} retrieval scores.")
    keep = rule.retrieval_mask(r_ret) if ids else np.zeros(0, dtype=bool)
    retrieval_set = tuple(cid for cid, k in zip(ids, keep, strict=True) if k)
    missing = [cid for cid in retrieval_set if cid not in clusters_by_chunk]
    if missing:
        raise ConformalError(
            f"No answer clusters for retrieved chunk(s) {missing[:5]}: generate answers for every chunk that "
            "passes rule.retrieval_mask, or the guarantee is lost."
        )
    hmp = isinstance(rule, HarmonicMeanRule)
    p_ret_all = rule.retrieval_pvalues(r_ret) if hmp and ids else None
    pairs: list[IncludedPair] = []
    for idx, (cid, k) in enumerate(zip(ids, keep, strict=True)):
        if not k:
            continue
        clusters = list(clusters_by_chunk[cid])
        if not clusters:
            continue
        r_gen = np.array([c.score for c in clusters])
        if hmp:
            assert p_ret_all is not None
            p_gen = rule.generation_pvalues(r_gen)
            p_r = float(p_ret_all[idx])
            mask = rule.include_pvalues(np.full(len(clusters), p_r), p_gen)
            pairs += [IncludedPair(cid, c, p_r, float(pg)) for c, pg, m in zip(clusters, p_gen, mask, strict=True) if m]
        else:
            mask = rule.include(np.full(len(clusters), r_ret[idx]), r_gen)
            pairs += [IncludedPair(cid, c) for c, m in zip(clusters, mask, strict=True) if m]
    method = rule.method + ("-asymptotic" if hmp and rule.asymptotic else "")
    return EndToEndDecision(
        method=method,
        guarantee=rule.guarantee,
        retrieval_set=retrieval_set,
        pairs=tuple(pairs),
        guaranteed=rule.guaranteed,
        reason=rule.reason,
    )
