"""Nonconformity score families for retrieval, and the set each threshold keeps.

On one query's host scores (best first) and gold position: ``similarity`` ``r = -s_gold`` (keep
``s >= -q``); ``rank`` (1 = best; keep the top ``floor(q)``); ``relative`` ``r = s_top1 - s_gold``
(keep ``s >= s_top1 - q``). A gold chunk outside the pool gives ``r = +inf`` (a miss).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from .errors import ConformalError

ScoreFamily = Literal["similarity", "rank", "relative"]
SCORE_FAMILIES: tuple[str, ...] = ("similarity", "rank", "relative")


def _check_family(family: str) -> None:
    if family not in SCORE_FAMILIES:
        raise ConformalError(f"Unknown score family {family!r}; choose one of {', '.join(SCORE_FAMILIES)} or 'auto'.")


def _sorted_scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(scores, dtype=float)
    if arr.size and np.isnan(arr).any():
        raise ConformalError("The host retriever returned a NaN score.")
    if arr.size > 1 and np.any(np.diff(arr) > 1e-12):
        raise ConformalError("Candidate scores must be sorted best first (descending).")
    return arr


def nonconformity(family: str, scores: Sequence[float] | np.ndarray, gold_positions: Sequence[int]) -> float:
    """Nonconformity score of one calibration query.

    ``gold_positions`` are 0-based in the best-first ``scores``; the best counts; none is a miss.

    Examples
    --------
    >>> nonconformity("relative", [0.9, 0.7, 0.5], [1])
    0.2...
    """
    _check_family(family)
    arr = _sorted_scores(scores)
    if len(gold_positions) == 0:
        return math.inf
    best = min(int(p) for p in gold_positions)
    if best < 0 or best >= arr.size:
        raise ConformalError(f"Gold position {best} is outside the candidate pool of {arr.size}.")
    if family == "similarity":
        return float(-arr[best])
    if family == "rank":
        return float(best + 1)
    return float(arr[0] - arr[best])


def keep_mask(
    family: str, scores: Sequence[float] | np.ndarray, threshold: float, *, validate: bool = True
) -> np.ndarray:
    """Boolean mask of the candidates a threshold keeps (ties are kept).

    ``validate=False`` skips the input checks for pools already checked (hot loops).

    Examples
    --------
    >>> keep_mask("relative", [0.9, 0.8, 0.5], 0.1).tolist()
    [True, True, False]
    """
    _check_family(family)
    arr = _sorted_scores(scores) if validate else np.asarray(scores, dtype=float)
    if math.isinf(threshold) and threshold > 0:
        return np.ones(arr.size, dtype=bool)
    if family == "similarity":
        return arr >= -threshold
    if family == "rank":
        return np.arange(1, arr.size + 1) <= threshold  # integer ranks: <= q  <=>  <= floor(q)
    if arr.size == 0:
        return np.zeros(0, dtype=bool)
    # exact, same arithmetic as nonconformity(): kept iff candidate_nonconformity <= threshold
    return (arr[0] - arr) <= threshold


def set_size(family: str, scores: Sequence[float] | np.ndarray, threshold: float) -> int:
    """Number of candidates kept.

    Examples
    --------
    >>> set_size("rank", [0.9, 0.8, 0.5], 2.0)
    2
    """
    return int(keep_mask(family, scores, threshold).sum())


def candidate_nonconformity(family: str, scores: Sequence[float] | np.ndarray, *, validate: bool = True) -> np.ndarray:
    """Nonconformity of every candidate as if it were the gold chunk (for p-values).

    Candidate ``i`` is kept by :func:`keep_mask` iff its value here is ``<= threshold``.
    ``validate=False`` skips the input checks for pools already checked (hot loops).

    Examples
    --------
    >>> candidate_nonconformity("rank", [0.9, 0.8]).tolist()
    [1.0, 2.0]
    """
    _check_family(family)
    arr = _sorted_scores(scores) if validate else np.asarray(scores, dtype=float)
    if family == "similarity":
        return -arr
    if family == "rank":
        return np.arange(1, arr.size + 1, dtype=float)
    return arr[0] - arr if arr.size else arr
