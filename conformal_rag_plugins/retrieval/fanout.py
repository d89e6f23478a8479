"""The framework-free frame of both adapters' ``FusionFanout``: one search per question, every pool from it.

Tuning compares hosts that differ only in the fusion setting and the pool size. A fan-out runs
one dense and one lexical search per question at the largest pool and cuts every
``(setting, pool size)`` pool from them (``llamaindex/fusion_fanout.py`` with the arithmetic of
``QueryFusionRetriever``, ``langchain/fusion_fanout.py`` with ``ScoredFusionRetriever.fuse``).
What does not depend on the framework is here: the checks of the kind and the pool sizes, and
the loop of :meth:`Fanout.many` over blocks of questions whose searches are batched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..core.errors import CalibrationError
from .pool_calibration import CandidatePool

#: ``(fusion setting or None, pool size)``: the key of one pool of a question.
FanoutKey = tuple[Any, int]
#: The hosts a fan-out stands for.
FANOUT_KINDS = ("dense", "bm25", "hybrid")


def block_size(batch_size: int | None, top: int, max_rows: int) -> int:
    """Questions per block: ``batch_size``, or as many as one query of ``max_rows`` rows returns at ``top`` each.

    Examples
    --------
    >>> block_size(None, 100, 40_000), block_size(7, 100, 40_000), block_size(None, 10**6, 40_000)
    (400, 7, 1)
    """
    return max(1, int(batch_size) if batch_size is not None else max_rows // max(1, int(top)))


class Fanout:
    """Every ``(fusion setting, pool size)`` pool of a question from one dense and one lexical search.

    A subclass gives the searches: :meth:`_search` for one question, :meth:`_search_many` for a
    block (batched), and :meth:`_pools` to cut the pools from them.

    Parameters
    ----------
    kind : {"dense", "bm25", "hybrid"}
    pool_sizes : sequence of int
        Kept sorted and without repeats in ``pool_sizes``.
    max_rows : int
        Rows one batched query may return (bounds the memory of a block).

    Examples
    --------
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
        """The pools of every question in order, as calling the fan-out on each gives them, from batched searches.

        ``batch_size`` questions (default: as many as one batched query returns,
        ``max_rows // largest pool``) are searched together.
        """
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
