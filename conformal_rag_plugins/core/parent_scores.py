"""Small-to-big retrieval: score each parent document from the chunks the host retrieved.

``how="max"``: the best chunk's score (what LangChain's ``ParentDocumentRetriever`` and
LlamaIndex's ``RecursiveRetriever`` do implicitly). ``"sum"``: the sum of min-max normalised
chunk scores (as LlamaIndex's ``relative_score`` fusion). Either is a fixed function of one
query's pool, so every family of :mod:`.retrieval_scores` calibrates on parents unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ConformalError

#: How a parent's score is made from its chunks' scores.
PARENT_AGGREGATIONS: tuple[str, ...] = ("max", "sum")


@dataclass(frozen=True)
class ParentPool:
    """Parents of one chunk pool, best first (ties: best chunk first), with their chunks' pool positions."""

    parent_ids: tuple[str, ...]
    scores: np.ndarray
    members: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return len(self.parent_ids)


def aggregate_to_parents(
    chunk_ids: Sequence[str | None],
    scores: Sequence[float] | np.ndarray,
    parent_of: Mapping[str, str | None] | Callable[[str], str | None],
    *,
    how: str = "max",
) -> ParentPool:
    """Group a chunk pool (best first) by parent and score every parent.

    A chunk without a parent is an error: treating it as its own parent would change what is returned.

    Examples
    --------
    >>> pool = aggregate_to_parents(["a1", "b1", "a2"], [0.9, 0.8, 0.7], {"a1": "A", "a2": "A", "b1": "B"})
    >>> pool.parent_ids, pool.scores.tolist(), pool.members
    (('A', 'B'), [0.9, 0.8], ((0, 2), (1,)))
    >>> aggregate_to_parents(["a1", "b1", "a2"], [0.9, 0.8, 0.7], {"a1": "A", "a2": "A", "b1": "B"}, how="sum").scores
    array([1. , 0.5])
    """
    if how not in PARENT_AGGREGATIONS:
        raise ConformalError(f"Unknown parent aggregation {how!r}; use one of {PARENT_AGGREGATIONS}.")
    arr = np.asarray(scores, dtype=float)
    if arr.ndim != 1 or arr.size != len(chunk_ids):
        raise ConformalError(f"Got {len(chunk_ids)} chunk ids and {arr.size} scores; they must be aligned.")
    if arr.size and np.isnan(arr).any():
        raise ConformalError("The host retriever returned a NaN score.")
    if arr.size > 1 and np.any(np.diff(arr) > 1e-12):
        raise ConformalError("Chunk scores must be sorted best first (descending) before aggregation.")
    lookup: Callable[[str], str | None] = parent_of.get if isinstance(parent_of, Mapping) else parent_of  # type: ignore[assignment]
    order: dict[str, list[int]] = {}
    for pos, cid in enumerate(chunk_ids):
        parent = lookup(str(cid)) if cid is not None else None
        if not parent:
            raise ConformalError(
                f"Chunk {cid!r} has no parent document, so it cannot be returned at parent level. Give every chunk "
                "its parent (a LlamaIndex PARENT/SOURCE relationship, or the LangChain metadata key the "
                "ParentDocumentRetriever uses), or calibrate at chunk level."
            )
        order.setdefault(str(parent), []).append(pos)
    parents = list(order)
    if how == "max":
        agg = np.array([arr[order[p][0]] for p in parents], dtype=float)
    else:
        span = float(arr.max() - arr.min()) if arr.size else 0.0
        norm = (arr - arr.min()) / span if span > 0 else np.ones_like(arr)
        agg = np.array([float(norm[order[p]].sum()) for p in parents], dtype=float)
    ranking = np.argsort(-agg, kind="stable")
    return ParentPool(
        tuple(parents[i] for i in ranking),
        agg[ranking],
        tuple(tuple(order[parents[i]]) for i in ranking),
    )
