"""Repeated random-split evaluation of retrieval thresholds on precomputed pools (then only arithmetic)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..core.baselines import conflare_threshold
from ..core.pools import PoolObservation, TrialSummary, choose_family
from ..core.quantile import conformal_quantile, pac_quantile
from ..core.retrieval_scores import keep_mask
from ..core.splits import DEFAULT_SPLITS, RandomSplits


def evaluate_splits(
    observations: Sequence[PoolObservation],
    alpha: float,
    *,
    family: str = "relative",
    splits: RandomSplits = DEFAULT_SPLITS,
    pac_delta: float | None = None,
    topk: Sequence[int] = (1, 5, 10),
) -> list[TrialSummary]:
    """Coverage and set size over random calibration/test splits (``splits``, a :class:`RandomSplits`).

    Methods: ``split`` (``family``; ``auto`` picks it on the ``optimisation_fraction`` of
    each calibration half), ``pac`` when ``pac_delta`` is set (epsilon = alpha),
    ``topk@k`` and ``conflare`` (CONFLARE's percentile rule on ``-similarity``,
    which, like CONFLARE, silently drops calibration misses).
    """
    import warnings

    obs = list(observations)
    n = len(obs)
    rng = np.random.default_rng(splits.seed)
    n_cal = round(n * splits.calibration_fraction)
    collected: dict[str, tuple[list[float], list[float], list[int], list[float]]] = {}
    with_costs = bool(obs) and all(o.costs is not None for o in obs)

    def record(method: str, test: Sequence[PoolObservation], fam: str, q: float, strict_lt: bool = False) -> None:
        covs, sizes, tokens = [], [], []
        for o in test:
            # CONFLARE keeps distance < threshold; on a similarity scale that is -s < t.
            mask = -o.scores < q if strict_lt else keep_mask(fam, o.scores, q, validate=False)
            covs.append(any(mask[p] for p in o.gold_positions))
            sizes.append(int(mask.sum()))
            if with_costs:
                tokens.append(float(o.costs[mask].sum()))  # type: ignore[index]
        entry = collected.setdefault(method, ([], [], [], []))
        entry[0].append(float(np.mean(covs)))
        entry[1].append(float(np.mean(sizes)))
        entry[2].extend(sizes)
        if with_costs:
            entry[3].append(float(np.mean(tokens)))

    for _ in range(splits.trials):
        perm = rng.permutation(n)
        cal = [obs[i] for i in perm[:n_cal]]
        test = [obs[i] for i in perm[n_cal:]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if family == "auto":
                n_opt = round(len(cal) * splits.optimisation_fraction)
                fam = choose_family(cal[:n_opt], alpha)
                final_cal = cal[n_opt:]
            else:
                fam, final_cal = family, cal
            q = conformal_quantile([o.score(fam) for o in final_cal], alpha)
            record("split", test, fam, q)
            if pac_delta is not None:
                qp = pac_quantile([o.score(fam) for o in final_cal], alpha, pac_delta)
                record("pac", test, fam, qp)
            for k in topk:
                record(f"topk@{k}", test, "rank", float(k))
            sim = [s for s in (o.score("similarity") for o in cal) if math.isfinite(s)]
            qc = conflare_threshold(sim, alpha) if sim else math.inf
            record("conflare", test, "similarity", qc, strict_lt=True)
    return [TrialSummary(alpha, m, tuple(c), tuple(s), tuple(a), tuple(t)) for m, (c, s, a, t) in collected.items()]
