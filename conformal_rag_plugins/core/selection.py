"""Turn a calibrated threshold into the set a retriever returns (with min_k / max_k)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ConformalError
from .retrieval_scores import candidate_nonconformity, keep_mask


@dataclass(frozen=True)
class SetDecision:
    """Which candidates to return (best-first positions) and whether the guarantee still holds.

    ``conformal_size`` is before ``min_k``/``max_k``; ``guaranteed`` is False when ``max_k`` cut the
    set or the threshold is ``+inf``, with the ``reason``.
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

    Padding keeps the guarantee (a superset); cutting loses it. ``validate=False`` skips the checks
    for callers that made them once (the retrievers' per-query path).

    Examples
    --------
    >>> decide_set("rank", [0.9, 0.8, 0.7], 2.0, max_k=1).guaranteed
    False
    """
    if validate:
        check_k_bounds(min_k, max_k)
    mask = keep_mask(family, scores, threshold, validate=validate)
    reason = (
        "The calibrated threshold is +inf: the conformal set is every chunk, more than the "
        "candidate pool holds, so the returned pool is not guaranteed to cover."
        if math.isinf(threshold)
        else ""
    )
    return _bounded(mask, min_k, max_k, reason)


def decide_chunk_set(
    family: str,
    scores: Sequence[float] | np.ndarray,
    thresholds: Sequence[float] | np.ndarray,
    *,
    min_k: int | None = None,
    max_k: int | None = None,
    validate: bool = True,
    not_guaranteed: str = "",
) -> SetDecision:
    """Label-conditional set: keep candidate ``i`` iff its nonconformity is ``<= thresholds[i]``.

    ``thresholds[i]`` is that of candidate ``i``'s own group, so a gold chunk of group ``g`` is kept
    with probability ``>= 1 - alpha`` given ``g``; the kept set need not be a prefix. ``min_k``/``max_k``
    as in :func:`decide_set`; a non-empty ``not_guaranteed`` is the reason the set is not guaranteed.

    Examples
    --------
    >>> d = decide_chunk_set("relative", [0.9, 0.8, 0.7], [0.05, 0.05, 0.25])
    >>> d.indices, d.guaranteed
    ((0, 2), True)
    """
    if validate:
        check_k_bounds(min_k, max_k)
    thr = np.asarray(thresholds, dtype=float)
    nonconf = candidate_nonconformity(family, scores, validate=validate)
    if thr.shape != nonconf.shape:
        raise ConformalError(f"{thr.size} thresholds for {nonconf.size} candidates: give one per candidate.")
    if np.isnan(thr).any():
        raise ConformalError("A candidate threshold is NaN.")
    return _bounded(nonconf <= thr, min_k, max_k, not_guaranteed)


def _bounded(mask: np.ndarray, min_k: int | None, max_k: int | None, reason: str) -> SetDecision:
    """The kept positions of ``mask`` padded to ``min_k`` (best first) and cut at ``max_k``."""
    conformal = np.flatnonzero(mask).tolist()
    chosen = conformal
    if min_k is not None and len(chosen) < min_k:
        extra = [i for i in range(len(mask)) if not mask[i]][: min_k - len(chosen)]
        chosen = sorted(chosen + extra)
    guaranteed = not reason
    if max_k is not None and len(chosen) > max_k:
        chosen = chosen[:max_k]
        guaranteed = False
        reason = (
            f"max_k={max_k} cut the conformal set of {len(conformal)} chunks: the coverage "
            "guarantee no longer holds for this query."
        )
    return SetDecision(tuple(chosen), len(conformal), guaranteed, reason)


def conformal_metadata(
    family: str,
    threshold: float,
    alpha: float,
    scores: np.ndarray,
    decision: SetDecision,
    thresholds: np.ndarray | None = None,
) -> list[tuple[int, float, dict[str, object]]]:
    """What both frameworks' retrievers attach to each returned candidate, in ``decision.indices`` order.

    ``(index, score, metadata)`` per kept candidate; the adapter stores the score under its own key.
    ``scores`` must be checked and best first; with per-candidate ``thresholds`` each
    ``conformal_threshold`` is its own.

    Examples
    --------
    >>> s = np.array([0.9, 0.8, 0.2])
    >>> d = decide_set("relative", s, 0.15)
    >>> [(i, m["conformal_nonconformity"], m["conformal_set_size"]) for i, _, m in conformal_metadata(
    ...     "relative", 0.15, 0.1, s, d)]
    [(0, 0.0, 2), (1, 0.09999999999999998, 2)]
    """
    if not decision.indices:
        return []
    nonconf = candidate_nonconformity(family, scores, validate=False).tolist()
    values = scores.tolist()
    shared = {  # the same for every candidate of this query, built once
        "conformal_threshold": threshold,
        "conformal_alpha": alpha,
        "conformal_score_family": family,
        "conformal_set_size": decision.conformal_size,
        "conformal_guaranteed": decision.guaranteed,
    }
    if thresholds is None:
        return [(i, values[i], {"conformal_nonconformity": nonconf[i], **shared}) for i in decision.indices]
    own = np.asarray(thresholds, dtype=float).tolist()
    return [
        (i, values[i], {"conformal_nonconformity": nonconf[i], **shared, "conformal_threshold": own[i]})
        for i in decision.indices
    ]


def best_first(raw: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A query's host scores as a float array, and the stable best-first order (``None`` when already sorted).

    ``None`` for a missing or NaN score, so the adapter can raise its own error naming the host.

    Examples
    --------
    >>> best_first([0.9, 0.5])[1] is None, best_first([0.5, 0.9])[1].tolist(), best_first([0.5, None])
    (True, [1, 0], None)
    """
    if any(s is None for s in raw):
        return None
    scores = np.asarray(raw, dtype=float)
    if np.isnan(scores).any():
        return None
    if scores.size > 1 and (scores[1:] > scores[:-1]).any():
        order = np.argsort(-scores, kind="stable")
        return scores[order], order
    return scores, None
