"""Framework-free small-to-big bookkeeping: a host's chunk pool to a parent-level pool.

The adapters' ``parent_retrieval.py`` find each chunk's parent and look it up in their own store;
calibration and query time then score parents with the same
:func:`~conformal_rag_plugins.core.parent_scores.aggregate_to_parents`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import CalibrationError
from ..core.parent_scores import PARENT_AGGREGATIONS, aggregate_to_parents
from ..datasets.examples import CalibrationExample
from .fingerprint import Fingerprint
from .pool_calibration import CandidatePool

#: Separator between the chunk host's retriever description and the parent unit in a fingerprint.
PARENT_MARK = ">"


@dataclass(frozen=True)
class ParentCandidates:
    """A parent-level pool (ids, texts, aggregated scores, best first) and, per parent, the chunk-pool
    positions that scored it, best first (``members``).
    """

    pool: CandidatePool
    members: tuple[tuple[int, ...], ...]

    def chunk_lists(self, chunks: CandidatePool, ids: Sequence[Any] | None = None) -> list[list[dict[str, Any]]]:
        """What each parent lists under ``conformal_chunks``: ``{"id", "score", "text"}`` of its chunks, best first.

        ``ids``: the chunk pool's ids, if not ``chunks.ids``.
        """
        ids = chunks.ids if ids is None else ids
        return [
            [{"id": ids[i], "score": float(chunks.scores[i]), "text": chunks.texts[i]} for i in positions]
            for positions in self.members
        ]


def check_parent_aggregation(how: str) -> str:
    """Return ``how`` when it is a known aggregation, else raise :class:`CalibrationError`."""
    if how not in PARENT_AGGREGATIONS:
        raise CalibrationError(f"parent aggregation must be one of {PARENT_AGGREGATIONS}, got {how!r}.")
    return how


def parent_unit_name(how: str) -> str:
    """The unit name recorded in fingerprints and reports, e.g. ``"parent:max"``."""
    return f"parent:{check_parent_aggregation(how)}"


def to_parent_pool(
    chunks: CandidatePool,
    parent_of: Mapping[str, str | None] | Callable[[str], str | None],
    parent_text: Mapping[str, str] | Callable[[str], str | None],
    *,
    how: str = "max",
) -> ParentCandidates:
    """Aggregate a chunk pool into parents (``how``: "max" or "sum") and attach each parent's text.

    ``parent_of`` maps chunk id -> parent id and ``parent_text`` parent id -> full text (mappings or
    callables); a chunk without a parent or a parent missing from the store raises
    :class:`CalibrationError`.

    Examples
    --------
    >>> import numpy as np
    >>> pool = CandidatePool(("a1", "b1", "a2"), ("x", "y", "z"), np.array([0.9, 0.8, 0.7]))
    >>> out = to_parent_pool(pool, {"a1": "A", "a2": "A", "b1": "B"}, {"A": "x z", "B": "y"})
    >>> out.pool.ids, out.pool.texts, out.members
    (('A', 'B'), ('x z', 'y'), ((0, 2), (1,)))
    >>> out.chunk_lists(pool)[0]
    [{'id': 'a1', 'score': 0.9, 'text': 'x'}, {'id': 'a2', 'score': 0.7, 'text': 'z'}]
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


def parent_fingerprint(chunk_host: Fingerprint, how: str) -> Fingerprint:
    """The chunk host's fingerprint with the parent unit appended to ``retriever``.

    So chunk and parent levels refuse each other, and ``max`` refuses ``sum``.

    Examples
    --------
    >>> fp = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
    >>> parent_fingerprint(fp, "max").retriever
    'dense>parent:max'
    """
    return replace(chunk_host, retriever=f"{chunk_host.retriever}{PARENT_MARK}{parent_unit_name(how)}")


def lift_gold_to_parents(
    examples: Sequence[CalibrationExample],
    parent_of: Mapping[str, str | None] | Callable[[str], str | None],
    expand: Mapping[str, Sequence[str]] | None = None,
) -> list[CalibrationExample]:
    """Replace chunk gold ids by their parents' ids (other ids are kept, e.g. parent ids).

    ``expand`` maps an id above the parent level (a document, a hierarchy's root) to the parents under it.

    Examples
    --------
    >>> ex = CalibrationExample("Who?", gold_ids=("A::chunk1", "B", "D"))
    >>> lift_gold_to_parents([ex], {"A::chunk1": "A"}, {"D": ["D1", "A"]})[0].gold_ids
    ('A', 'B', 'D1')
    """
    lookup = parent_of.get if isinstance(parent_of, Mapping) else parent_of
    more = expand or {}
    out = []
    for ex in examples:
        lifted = ((lookup(g) or g) for g in ex.gold_ids)
        ids = tuple(dict.fromkeys(p for g in lifted for p in more.get(g, (g,))))
        out.append(ex if ids == tuple(ex.gold_ids) else replace(ex, gold_ids=ids))
    return out
