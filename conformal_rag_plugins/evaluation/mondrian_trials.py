"""Within-group coverage and set size of the pooled and per-group (Mondrian) thresholds over random splits.

Every trial re-splits the precomputed pools exactly as :func:`~.retrieval_trials.evaluate_splits`
does with the same ``splits``, and computes both thresholds on the same split; no re-querying.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.errors import ConformalError
from ..core.mondrian import check_group_label, group_thresholds
from ..core.pools import PoolObservation
from ..core.quantile import conformal_quantile
from ..core.retrieval_scores import candidate_nonconformity
from ..core.splits import DEFAULT_SPLITS, RandomSplits


@dataclass(frozen=True)
class GroupTrials:
    """Per-trial, per-group results: arrays of shape ``(trials, groups)``, NaN where a group has no test question.

    ``n`` counts each group's questions (calibration and test); ``coverage_*`` is the share of a
    group's test questions whose gold is kept, ``size_*`` their mean set size; ``fallback`` marks a
    group too small for its own threshold in that trial's calibration half (or absent from it),
    which kept every candidate (the default ``fallback="keep_all"``).
    """

    alpha: float
    family: str
    groups: tuple[str, ...]
    n: np.ndarray
    coverage_pooled: np.ndarray
    coverage_group: np.ndarray
    size_pooled: np.ndarray
    size_group: np.ndarray
    fallback: np.ndarray
    n_test: np.ndarray

    def report(self) -> dict[str, dict[str, object]]:
        """The ``groups`` block of ``conformal-rag evaluate``: per group its size, and both rules' means."""

        def stats(cov: np.ndarray, size: np.ndarray) -> dict[str, float]:
            return {
                "mean_coverage": float(np.nanmean(cov)),
                "std_coverage": float(np.nanstd(cov, ddof=1)) if np.sum(~np.isnan(cov)) > 1 else 0.0,
                "mean_set_size": float(np.nanmean(size)),
            }

        out: dict[str, dict[str, object]] = {}
        for j, g in enumerate(self.groups):
            out[g] = {
                "n": int(self.n[j]),
                "pooled": stats(self.coverage_pooled[:, j], self.size_pooled[:, j]),
                "per_group": stats(self.coverage_group[:, j], self.size_group[:, j]),
                "frac_trials_pooled_fallback": float(self.fallback[:, j].mean()),
            }
        return out


def _candidate_matrix(observations: Sequence[PoolObservation], family: str) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate's nonconformity, padded with +inf, and each pool's size."""
    rows = [candidate_nonconformity(family, o.scores, validate=False) for o in observations]
    width = max((r.size for r in rows), default=0)
    mat = np.full((len(rows), max(width, 1)), np.inf)
    for i, r in enumerate(rows):
        mat[i, : r.size] = r
    return mat, np.array([r.size for r in rows])


def _candidate_group_matrix(
    candidate_groups: Sequence[Sequence[str]], obs: Sequence[PoolObservation], names: tuple[str, ...], shape: tuple
) -> np.ndarray:
    """Index into ``names`` of every candidate's group (``len(names)`` for a group without questions)."""
    if len(candidate_groups) != len(obs):
        raise ConformalError(f"{len(obs)} observations but candidate groups for {len(candidate_groups)}.")
    index = {g: j for j, g in enumerate(names)}
    out = np.full(shape, len(names), dtype=int)
    for i, (o, labels) in enumerate(zip(obs, candidate_groups, strict=True)):
        if len(labels) != o.scores.size:
            raise ConformalError(f"Observation {i} has {o.scores.size} candidates but {len(labels)} candidate groups.")
        out[i, : len(labels)] = [index.get(str(g), len(names)) for g in labels]
    return out


def simulate_group_splits(
    observations: Sequence[PoolObservation],
    groups: Sequence[str],
    alpha: float,
    *,
    family: str = "relative",
    splits: RandomSplits = DEFAULT_SPLITS,
    group_quantile: Callable[[np.ndarray, float], float] | None = None,
    candidate_groups: Sequence[Sequence[str]] | None = None,
) -> GroupTrials:
    """Per-group results over the random splits of ``splits`` (as :func:`~.retrieval_trials.evaluate_splits`).

    Parameters
    ----------
    groups : sequence of str
        Each observation's group: the query's, or with ``candidate_groups`` its gold chunk's.
    candidate_groups : sequence of sequence of str, optional
        Label-conditional form: the group of every candidate, aligned with its scores. Candidate
        ``c`` is kept iff within the threshold of ``c``'s own group (a group without calibration
        questions keeps its candidates, ``+inf``); coverage is the gold's under its group's threshold.
        Without it every candidate gets the query's group threshold.
    group_quantile : callable, optional
        ``(group_scores, alpha) -> threshold`` replacing the per-group rule (negative controls in
        tests); default :func:`~.mondrian.group_thresholds` with its keep-all fallback.

    Examples
    --------
    >>> obs = [PoolObservation(np.array([1.0, 0.9 - i / 100]), (1,)) for i in range(40)]
    >>> res = simulate_group_splits(obs, ["a", "b"] * 20, 0.2, splits=RandomSplits(trials=5))
    >>> res.coverage_group.shape
    (5, 2)
    """
    obs = list(observations)
    labels = [check_group_label(g, f" (question {i})") for i, g in enumerate(groups)]
    if len(labels) != len(obs):
        raise ConformalError(f"{len(obs)} observations but {len(labels)} group labels.")
    if not obs:
        raise ConformalError("No questions to evaluate.")
    names = tuple(sorted(set(labels)))
    gidx = np.array([names.index(g) for g in labels])
    r = np.array([o.score(family) for o in obs])
    if np.isnan(r).any():
        raise ConformalError("A nonconformity score is NaN; the host returned NaN scores.")
    cand, pool_len = _candidate_matrix(obs, family)
    cand_gidx = None if candidate_groups is None else _candidate_group_matrix(candidate_groups, obs, names, cand.shape)
    n = len(obs)
    n_cal = round(n * splits.calibration_fraction)
    rng = np.random.default_rng(splits.seed)  # the same splits as evaluate_splits(splits=splits)
    shape = (splits.trials, len(names))
    cov_p, cov_g, size_p, size_g = (np.full(shape, np.nan) for _ in range(4))
    fallback = np.zeros(shape, dtype=bool)
    n_test = np.zeros(shape, dtype=int)

    def apply(q: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        covered = np.isfinite(r[test]) & (r[test] <= q)
        size = np.where(np.isinf(q), pool_len[test], (cand[test] <= q[:, None]).sum(axis=1))
        return covered.astype(float), size.astype(float)

    def apply_by_chunk(q_group: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert cand_gidx is not None
        q_ext = np.append(q_group, math.inf)  # index len(names): a candidate group with no calibration questions
        per_cand = q_ext[cand_gidx[test]]
        real = np.arange(cand.shape[1])[None, :] < pool_len[test][:, None]
        size = ((cand[test] <= per_cand) & real).sum(axis=1)
        covered = np.isfinite(r[test]) & (r[test] <= q_group[gidx[test]])
        return covered.astype(float), size.astype(float)

    for t in range(splits.trials):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pooled = conformal_quantile(r[cal], alpha)
            if group_quantile is None:
                per = group_thresholds(r[cal], [names[i] for i in gidx[cal]], alpha, pooled=pooled, errors="ignore")
                q_of = {g: (v.threshold, v.source != "group") for g, v in per.items()}
            else:
                q_of = {g: (group_quantile(r[cal][gidx[cal] == j], alpha), False) for j, g in enumerate(names)}
        q_group = np.array([q_of.get(g, (math.inf, True))[0] for g in names])
        fallback[t] = [q_of.get(g, (math.inf, True))[1] for g in names]
        c_p, s_p = apply(np.full(test.size, pooled), test)
        c_g, s_g = apply(q_group[gidx[test]], test) if cand_gidx is None else apply_by_chunk(q_group, test)
        for j in range(len(names)):
            m = gidx[test] == j
            n_test[t, j] = int(m.sum())
            if m.any():
                cov_p[t, j], size_p[t, j] = c_p[m].mean(), s_p[m].mean()
                cov_g[t, j], size_g[t, j] = c_g[m].mean(), s_g[m].mean()
    counts = np.bincount(gidx, minlength=len(names))
    return GroupTrials(alpha, family, names, counts, cov_p, cov_g, size_p, size_g, fallback, n_test)
