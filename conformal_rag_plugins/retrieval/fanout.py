"""The framework-free frame of both adapters' ``FusionFanout``: one search per question, every pool from it.

Tuning compares hosts differing only in fusion setting and pool size: one dense and one lexical
search at the largest pool give every ``(setting, pool size)`` pool. Here: the checks, the
batched loop of :meth:`Fanout.many`, and ``QueryFusionRetriever``'s arithmetic (:func:`fuse_ranked`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..core.errors import CalibrationError
from .pool_calibration import CandidatePool

#: ``(fusion setting or None, pool size)``: the key of one pool of a question.
FanoutKey = tuple[Any, int]
#: The hosts a fan-out stands for.
FANOUT_KINDS = ("dense", "bm25", "hybrid")


def scaled_scores(scores: Sequence[float], weight: float, dist_based: bool) -> list[float]:
    """One list's scores as ``QueryFusionRetriever._relative_score_fusion`` scales them (same float operations).

    Min-max (``relative_score``) or mean +- 3 std (``dist_based_score``) to [0, 1], times ``weight``.

    >>> scaled_scores([2.0, 1.0, 0.0], 0.5, False)
    [0.5, 0.25, 0.0]
    """
    if not scores:
        return []
    if dist_based:
        mean = sum(scores) / len(scores)
        std = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
        low, high = mean - 3 * std, mean + 3 * std
    else:
        low, high = min(scores), max(scores)
    out = []
    for x in scores:
        y = (1.0 if high > 0 else 0.0) if high == low else (x - low) / (high - low)
        out.append(y * weight / 1)  # num_queries = 1
    return out


def fuse_ranked(
    lists: Sequence[Sequence[tuple[str, float | None]]],
    hashes: Mapping[str, str],
    weights: Sequence[float],
    dist_based: bool,
) -> list[tuple[str, float, int]]:
    """``(id, fused score, list of its first occurrence)`` best first, as ``QueryFusionRetriever`` fuses ``lists``.

    Ids with the same content hash are one candidate scored by the sum of scaled scores (missing = 0).

    >>> fuse_ranked([[("a", 2.0), ("b", 1.0), ("c", 0.0)], [("b", 1.0)]], {i: i for i in "abc"}, [0.5, 0.5], False)
    [('b', 0.75, 0), ('a', 0.5, 0), ('c', 0.0, 0)]
    """
    merged: dict[str, list] = {}
    for source, (pairs, weight) in enumerate(zip(lists, weights, strict=True)):
        scaled = scaled_scores([score or 0.0 for _, score in pairs], weight, dist_based)
        for (nid, _), value in zip(pairs, scaled, strict=True):
            key = hashes[nid]
            if key in merged:
                merged[key][1] = merged[key][1] + value
            else:
                merged[key] = [nid, value, source]
    ordered = sorted(merged.values(), key=lambda item: item[1], reverse=True)
    return [(nid, score, source) for nid, score, source in ordered]


def block_size(batch_size: int | None, top: int, max_rows: int) -> int:
    """Questions per block: ``batch_size``, or as many as one query of ``max_rows`` rows returns at ``top`` each.

    >>> block_size(None, 100, 40_000), block_size(7, 100, 40_000), block_size(None, 10**6, 40_000)
    (400, 7, 1)
    """
    return max(1, int(batch_size) if batch_size is not None else max_rows // max(1, int(top)))


class Fanout:
    """Every ``(fusion setting, pool size)`` pool of a question from one dense and one lexical search.

    Subclasses give :meth:`_search`, :meth:`_search_many` (batched) and :meth:`_pools`; ``pool_sizes``
    are kept sorted without repeats; ``max_rows`` bounds one batched query.

    >>> class Toy(Fanout):
    ...     def _search(self, question):
    ...         return [question], []
    ...     def _pools(self, dense, lexical):
    ...         return {(None, k): dense for k in self.pool_sizes}
    >>> fan = Toy("dense", (5, 2, 5), max_rows=10)
    >>> fan.pool_sizes, fan("q")
    ((2, 5), {(None, 2): ['q'], (None, 5): ['q']})
    >>> [pools[(None, 5)] for pools in fan.many(["a", "b"], batch_size=1)]
    [['a'], ['b']]
    """

    def __init__(self, kind: str, pool_sizes: Sequence[int], *, max_rows: int) -> None:
        if kind not in FANOUT_KINDS or not pool_sizes:
            raise CalibrationError(f"FusionFanout needs a kind in dense/bm25/hybrid and pool sizes, got {kind!r}.")
        self.kind = kind
        self.pool_sizes = tuple(sorted(set(int(p) for p in pool_sizes)))
        self.max_rows = max_rows

    def __call__(self, question: str) -> dict[FanoutKey, CandidatePool]:
        """Every pool of ``question``, keyed by ``(fusion setting or None, pool size)``."""
        return self._pools(*self._search(question))

    def many(
        self, questions: Sequence[str], *, batch_size: int | None = None
    ) -> Iterator[dict[FanoutKey, CandidatePool]]:
        """Every question's pools in order, from batched searches (default block ``max_rows // largest pool``)."""
        questions = list(questions)
        step = block_size(batch_size, self.pool_sizes[-1], self.max_rows)
        for start in range(0, len(questions), step):
            dense, lexical = self._search_many(questions[start : start + step])
            for d, lex in zip(dense, lexical, strict=True):
                yield self._pools(d, lex)

    def _search(self, question: str) -> tuple[Any, Any]:
        """The dense and the lexical results of one question at the largest pool."""
        raise NotImplementedError

    def _search_many(self, block: list[str]) -> tuple[list[Any], list[Any]]:
        """The dense and the lexical results of every question of ``block`` (default: one by one)."""
        found = [self._search(q) for q in block]
        return [d for d, _ in found], [lex for _, lex in found]

    def _pools(self, dense: Any, lexical: Any) -> dict[FanoutKey, CandidatePool]:
        """Every pool of one question, cut from its two results."""
        raise NotImplementedError
