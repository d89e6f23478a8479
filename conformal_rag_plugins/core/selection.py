"""Turn a calibrated threshold into the set a retriever returns (with min_k / max_k)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ConformalError
from .retrieval_scores import keep_mask

__all__ = ["SetDecision", "check_k_bounds", "decide_set"]


@dataclass(frozen=True)
class SetDecision:
    """Which candidates to return and whether the conformal guarantee still holds.

    Attributes
    ----------
    indices : tuple of int
        Positions (best first) of the returned candidates.
    conformal_size : int
        Size of the conformal set before ``min_k`` / ``max_k``.
    guaranteed : bool
        False when ``max_k`` cut the conformal set or the threshold is ``+inf``
        (the set would need more than the candidate pool holds).
    reason : str
        Empty when guaranteed, otherwise why not.
    """

    indices: tuple[int, ...]
    conformal_size: int
    guaranteed: bool
    reason: str = ""


def check_k_bounds(min_k: int | None, max_k: int | None) -> None:
    """Raise a clear error for negative or crossed bounds.

    Examples
    --------
    >>> check_k_bounds(1, 5)
    """
    if min_k is not None and min_k < 0:
        raise ConformalError(f"min_k must be >= 0, got {min_k}.")
    if max_k is not None and max_k < 1:
        raise ConformalError(f"max_k must be >= 1, got {max_k}.")
    if min_k is not None and max_k is not None and max_k < min_k:
        raise ConformalError(f"max_k ({max_k}) must be >= min_k ({min_k}); lower min_k or raise max_k.")


def decide_set(
    family: str,
    scores: Sequence[float] | np.ndarray,
    threshold: float,
    *,
    min_k: int | None = None,
    max_k: int | None = None,
    validate: bool = True,
) -> SetDecision:
    """Apply the threshold, then pad to ``min_k`` and cut at ``max_k``.

    Padding keeps the guarantee (a superset); cutting loses it. ``validate=False`` skips the
    checks of the bounds and of the scores (no NaN, best first) for callers that already made
    them once (the retrievers' per-query path).

    Examples
    --------
    >>> decide_set("rank", [0.9, 0.8, 0.7], 2.0, max_k=1).guaranteed
    False
    """
    if validate:
        check_k_bounds(min_k, max_k)
    mask = keep_mask(family, scores, threshold, validate=validate)
    conformal = np.flatnonzero(mask).tolist()
    chosen = conformal
    if min_k is not None and len(chosen) < min_k:
        chosen = list(range(min(min_k, len(mask))))
    guaranteed, reason = True, ""
    if math.isinf(threshold):
        guaranteed = False
        reason = (
            "The calibrated threshold is +inf: the conformal set is every chunk, more than the "
            "candidate pool holds, so the returned pool is not guaranteed to cover."
        )
    if max_k is not None and len(chosen) > max_k:
        chosen = chosen[:max_k]
        guaranteed = False
        reason = (
            f"max_k={max_k} cut the conformal set of {len(conformal)} chunks: the coverage "
            "guarantee no longer holds for this query."
        )
    return SetDecision(tuple(chosen), len(conformal), guaranteed, reason)
