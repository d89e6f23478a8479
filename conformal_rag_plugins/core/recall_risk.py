"""The recall loss of a retrieval set when a question has several gold chunks.

With gold nonconformities ``r_1..r_m`` (``+inf`` outside the pool), the loss at ``lam`` is
``L(lam) = 1 - #{j : r_j <= lam} / m``: non-increasing, bounded by 1, changing only at the finite
``r_j`` (:func:`risk_curve`). The CRC and Learn-then-Test thresholds are in :mod:`.quantile`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .errors import CalibrationError
from .retrieval_scores import candidate_nonconformity


def gold_nonconformity(
    family: str, scores: Sequence[float] | np.ndarray, gold_positions: Sequence[int], n_gold: int | None = None
) -> np.ndarray:
    """Sorted nonconformity of every gold chunk of one question, ``+inf`` for those outside the pool.

    ``n_gold`` is how many gold chunks the question has in all (default: those in the pool, at least 1).

    Examples
    --------
    >>> gold_nonconformity("rank", [0.9, 0.8, 0.7], [2, 0], n_gold=3).tolist()
    [1.0, 3.0, inf]
    """
    positions = sorted({int(p) for p in gold_positions})
    arr = np.asarray(scores, dtype=float)
    if positions and (positions[0] < 0 or positions[-1] >= arr.size):
        raise CalibrationError(f"Gold positions {positions} lie outside the candidate pool of {arr.size}.")
    total = max(len(positions), 1) if n_gold is None else int(n_gold)
    if total < max(len(positions), 1):
        raise CalibrationError(f"n_gold = {n_gold} is smaller than the {len(positions)} gold chunk(s) in the pool.")
    inside = candidate_nonconformity(family, arr)[positions] if positions else np.zeros(0)
    return np.sort(np.concatenate([inside, np.full(total - len(positions), math.inf)]))


def check_gold_scores(gold_scores: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Return every question's gold nonconformities as a sorted float array, after checking them.

    :class:`CalibrationError` for no question, a question without gold, a NaN or a ``-inf``.

    Examples
    --------
    >>> [a.tolist() for a in check_gold_scores([[0.3, 0.1], [float("inf")]])]
    [[0.1, 0.3], [inf]]
    """
    if len(gold_scores) == 0:
        raise CalibrationError("No calibration questions were given: pass at least one question with gold chunks.")
    out = []
    for i, g in enumerate(gold_scores):
        arr = np.asarray(g, dtype=float).ravel()
        if arr.size == 0:
            raise CalibrationError(
                f"Calibration question {i} has no gold chunk; recall needs at least one (a gold chunk outside the "
                "pool is +inf, not absent)."
            )
        if np.isnan(arr).any() or np.isneginf(arr).any():
            raise CalibrationError(f"Calibration question {i} has a NaN or -inf gold nonconformity.")
        out.append(np.sort(arr))
    return out


def risk_curve(gold_scores: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray, int]:
    """The candidate thresholds and the summed loss at each.

    ``(lambdas, total_loss, n)``: the distinct finite gold nonconformities ascending (the loss changes
    only there), ``sum_i L_i`` at each (``n`` below the first), and the number of questions.

    Examples
    --------
    >>> lam, loss, n = risk_curve([[0.1, 0.3], [0.2], [float("inf")]])
    >>> lam.tolist(), loss.tolist(), n
    ([0.1, 0.2, 0.3], [2.5, 1.5, 1.0], 3)
    """
    arrays = check_gold_scores(gold_scores)
    n = len(arrays)
    values = np.concatenate(arrays)
    weights = np.concatenate([np.full(a.size, 1.0 / a.size) for a in arrays])
    finite = np.isfinite(values)
    values, weights = values[finite], weights[finite]
    order = np.argsort(values, kind="stable")
    values, kept = values[order], np.cumsum(weights[order])
    if values.size == 0:
        return values, values.copy(), n
    last = np.flatnonzero(np.append(values[1:] != values[:-1], True))  # last index of each distinct value
    return values[last], np.maximum(n - kept[last], 0.0), n


def recall_at(gold_scores: Sequence[float] | np.ndarray, threshold: float) -> float:
    """Share of one question's gold chunks kept at ``threshold`` (ties kept).

    Examples
    --------
    >>> recall_at([0.1, 0.3, float("inf")], 0.2)
    0.333...
    """
    arr = np.asarray(gold_scores, dtype=float)
    return float(np.count_nonzero(np.isfinite(arr) & (arr <= threshold)) / arr.size)
