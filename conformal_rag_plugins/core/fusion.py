"""Score fusion of two ranked candidate lists (dense + lexical), numpy only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from .errors import ConformalError

# Equal weights: on the bundled SQuAD subset 0.5 gave smaller conformal sets than 0.6-0.8 in both
# frameworks (see benchmarks/retrieval.py); issue-level tuning belongs on an optimisation split.
DEFAULT_DENSE_WEIGHT = 0.5

FusionMethod = Literal["zscore", "minmax"]


def normalise(scores: np.ndarray, method: str) -> np.ndarray:
    """Normalise one retriever's candidate scores (z-score or min-max).

    Examples
    --------
    >>> normalise(np.array([1.0, 3.0]), "minmax").tolist()
    [0.0, 1.0]
    """
    if scores.size == 0:
        return scores
    if method == "zscore":
        sd = scores.std()
        return (scores - scores.mean()) / sd if sd > 0 else np.zeros_like(scores)
    if method == "minmax":
        span = scores.max() - scores.min()
        return (scores - scores.min()) / span if span > 0 else np.ones_like(scores)
    raise ConformalError(f"Unknown fusion method {method!r}; use 'zscore' or 'minmax'.")


def fuse_scores(
    first: Mapping[str, float],
    second: Mapping[str, float],
    *,
    weight: float = DEFAULT_DENSE_WEIGHT,
    method: str = "zscore",
) -> list[tuple[str, float]]:
    """Fuse two ``{id: score}`` candidate maps: ``weight*norm(first) + (1-weight)*norm(second)``.

    A candidate missing from a list gets its lowest normalised score; best first, ties by id.

    Examples
    --------
    >>> fuse_scores({"a": 0.9, "b": 0.1}, {"b": 5.0, "c": 1.0}, weight=0.5, method="minmax")
    [('a', 0.5), ('b', 0.5), ('c', 0.0)]
    """
    if not 0.0 <= weight <= 1.0:
        raise ConformalError(f"Fusion weight must be in [0, 1], got {weight}.")
    fused: dict[str, float] = {}
    parts = []
    for mapping, w in ((first, weight), (second, 1.0 - weight)):
        ids = list(mapping)
        normed = normalise(np.asarray([mapping[i] for i in ids], dtype=float), method)
        floor = float(normed.min()) if normed.size else 0.0
        parts.append((dict(zip(ids, normed.tolist(), strict=True)), floor, w))
    for cid in set(first) | set(second):
        fused[cid] = sum(w * norm.get(cid, floor) for norm, floor, w in parts)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
