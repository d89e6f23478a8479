"""A small BM25 index over (id, text) pairs using ``bm25s`` (framework-free)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class BM25Index:
    """BM25 scores for the top candidates of a query.

    Examples
    --------
    >>> idx = BM25Index(["a", "b"], ["the cat sat", "a dog ran"])
    >>> idx.search("cat", 1)[0][0]
    'a'
    """

    def __init__(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        import bm25s

        if len(ids) != len(texts) or not ids:
            raise ValueError("BM25Index needs as many ids as texts, and at least one.")
        self.ids = list(ids)
        self.texts = list(texts)
        self._text_by_id: dict[str, str] | None = None
        self._bm25s = bm25s
        self._model = bm25s.BM25()
        self._model.index(bm25s.tokenize(self.texts, stopwords="en", show_progress=False), show_progress=False)

    def text_of(self, doc_id: str) -> str:
        """The indexed text of ``doc_id`` (``""`` when unknown)."""
        if self._text_by_id is None:
            self._text_by_id = dict(zip(self.ids, self.texts, strict=True))
        return self._text_by_id.get(doc_id, "")

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` ``(id, score)`` pairs, best first; zero-score hits are dropped."""
        k = min(k, len(self.ids))
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self._model.retrieve(tokens, k=k, show_progress=False)
        return self._hits(docs[0], scores[0])

    def _hits(self, docs: Sequence[int], scores: Sequence[float]) -> list[tuple[str, float]]:
        return [(self.ids[int(d)], float(s)) for d, s in zip(docs, scores, strict=True) if s > 0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """:meth:`search` for every query, tokenised and scored in one ``bm25s`` call.

        Each list equals ``search(query, k)``, ties included (bm25s scores and selects per query).

        Examples
        --------
        >>> idx = BM25Index(["a", "b"], ["the cat sat", "a dog ran"])
        >>> [[i for i, _ in hits] for hits in idx.search_many(["cat", "dog", "the"], 1)]
        [['a'], ['b'], []]
        >>> idx.search_many(["cat"], 1) == [idx.search("cat", 1)]
        True
        """
        queries = list(queries)
        out: list[list[tuple[str, float]]] = [[] for _ in queries]
        if not queries:
            return out
        k = min(k, len(self.ids))
        tokens = self._bm25s.tokenize(queries, stopwords="en", show_progress=False)
        words = {i: w for w, i in tokens.vocab.items()}
        # A query with no token after stop words matches nothing, as in :meth:`search`.
        rows = [i for i, ids in enumerate(tokens.ids) if len(ids) > 0]
        if not rows:
            return out
        docs, scores = self._model.retrieve([[words[t] for t in tokens.ids[i]] for i in rows], k=k, show_progress=False)
        for j, i in enumerate(rows):
            out[i] = self._hits(docs[j], scores[j])
        return out


def retrieve_batch(
    model: Any,
    queries: Sequence[str],
    k: int,
    *,
    token_pattern: str,
    stemmer: Any = None,
    weight_mask: Sequence[float] | None = None,
) -> tuple[Any, Any]:
    """``(indexes, scores)`` of a ``bm25s.BM25`` for every query: one tokenisation, one retrieval.

    With a LlamaIndex ``BM25Retriever``'s ``stemmer``, ``token_pattern`` and ``corpus_weight_mask``
    the rows are what its ``retrieve`` computes one query at a time.
    """
    import bm25s
    import numpy as np

    tokens = bm25s.tokenize(list(queries), stemmer=stemmer, token_pattern=token_pattern, show_progress=False)
    mask = np.array(weight_mask) if weight_mask else None
    return model.retrieve(tokens, k=k, show_progress=False, weight_mask=mask)
