"""Rows of ``conformal-rag evaluate --control recall``: the recall rule beside the single-gold rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.pools import PoolObservation
from ..core.recall_pools import RecallPools
from ..evaluation.recall_trials import evaluate_recall_splits

#: Columns of the recall table the CLI prints.
RECALL_COLUMNS = ["alpha", "method", "target_recall", "mean_recall", "std_recall", "mean_coverage", "mean_set_size"]


def recall_report(
    observations: Sequence[PoolObservation],
    alphas: Sequence[float],
    *,
    score: str,
    trials: int,
    seed: int,
    ltt_delta: float | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Recall rows for every alpha, and a summary of how many gold chunks the questions have.

    Every chunk holding a reference answer is gold. Rows: ``crc`` (risk control of ``1 - recall``),
    ``ltt`` with ``ltt_delta``, and ``single-gold`` (split threshold on the best gold chunk), on the
    same splits; ``auto`` uses ``relative``.

    Examples
    --------
    >>> obs = [PoolObservation(np.array([1.0, 0.9, 0.5 - i / 100]), (0, 2)) for i in range(40)]
    >>> rows, info = recall_report(obs, [0.2], score="rank", trials=3, seed=0)
    >>> [r["method"] for r in rows], info["n_multi_gold"]
    (['crc', 'single-gold'], 40)
    """
    family = "relative" if score == "auto" else score
    pools = RecallPools.build(observations, family)
    rows: list[dict[str, Any]] = []
    for alpha in alphas:
        for summary in evaluate_recall_splits(
            observations, alpha, family=family, trials=trials, seed=seed, ltt_delta=ltt_delta, pools=pools
        ):
            rows.append(summary.as_row())
    counts = np.asarray([g.size for g in pools.gold])
    info = {
        "family": family,
        "n_multi_gold": int(np.count_nonzero(counts > 1)),
        "mean_gold_chunks": float(counts.mean()),
        "max_gold_chunks": int(counts.max()),
        "n_gold_outside_pool": int(sum(int(np.isinf(g).sum()) for g in pools.gold)),
    }
    return rows, info
