"""Turn a host's chunk pool into a parent-level pool (small-to-big retrieval), framework-free.

The adapters (``llamaindex/parent_retrieval.py``, ``langchain/parent_retrieval.py``) find each
chunk's parent with their framework's own pattern and look the parents up in their own
store; this module only does the bookkeeping shared by calibration and query time, so
both score a parent with the same function
(:func:`~conformal_rag_plugins.core.parent_scores.aggregate_to_parents`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..core.errors import CalibrationError
from ..core.parent_scores import PARENT_AGGREGATIONS, aggregate_to_parents
from .pool_calibration import CandidatePool

__all__ = ["ParentCandidates", "check_parent_aggregation", "parent_unit_name", "to_parent_pool"]


@dataclass(frozen=True)
class ParentCandidates:
    """A parent-level pool and, for every parent, the chunk-pool positions that scored it.

    Attributes
    ----------
    pool : CandidatePool
        Parent ids, parent texts and aggregated scores, best first.
    members : tuple of tuple of int
        Positions in the chunk pool of each parent's chunks, best first.
    """

    pool: CandidatePool
    members: tuple[tuple[int, ...], ...]


def check_parent_aggregation(how: str) -> str:
    """Return ``how`` when it is a known aggregation, else raise :class:`CalibrationError`.

    Examples
    --------
    >>> check_parent_aggregation("max")
    'max'
    """
    if how not in PARENT_AGGREGATIONS:
        raise CalibrationError(f"parent aggregation must be one of {PARENT_AGGREGATIONS}, got {how!r}.")
    return how


def parent_unit_name(how: str) -> str:
    """The unit name recorded in fingerprints and reports, e.g. ``"parent:max"``.

    Examples
    --------
    >>> parent_unit_name("sum")
    'parent:sum'
    """
    return f"parent:{check_parent_aggregation(how)}"


def to_parent_pool(
    chunks: CandidatePool,
    parent_of: Mapping[str, str | None] | Callable[[str], str | None],
    parent_text: Mapping[str, str] | Callable[[str], str | None],
    *,
    how: str = "max",
) -> ParentCandidates:
    """Aggregate a chunk pool into parents and attach each parent's text.

    Parameters
    ----------
    chunks : CandidatePool
        The host's chunk pool, best first.
    parent_of : mapping or callable
        Chunk id -> parent id (``None``/missing raises).
    parent_text : mapping or callable
        Parent id -> the parent's full text (``None``/missing raises: the parent is not in the store).
    how : {"max", "sum"}

    Raises
    ------
    ConformalError
        A chunk without a parent, or a parent missing from the store.

    Examples
    --------
    >>> import numpy as np
    >>> pool = CandidatePool(("a1", "b1", "a2"), ("x", "y", "z"), np.array([0.9, 0.8, 0.7]))
    >>> out = to_parent_pool(pool, {"a1": "A", "a2": "A", "b1": "B"}, {"A": "x z", "B": "y"})
    >>> out.pool.ids, out.pool.texts, out.members
    (('A', 'B'), ('x z', 'y'), ((0, 2), (1,)))
    """
    agg = aggregate_to_parents(chunks.ids, chunks.scores, parent_of, how=check_parent_aggregation(how))
    lookup = parent_text.get if isinstance(parent_text, Mapping) else parent_text
    texts = []
    for pid in agg.parent_ids:
        text = lookup(pid)
        if text is None:
            raise CalibrationError(
                f"Parent document {pid!r} is not in the store: a chunk points to it, but it cannot be returned. "
                "Add the parent documents to the docstore, or rebuild the chunks from the documents you store."
            )
        texts.append(text)
    return ParentCandidates(CandidatePool(agg.parent_ids, tuple(texts), agg.scores), agg.members)
