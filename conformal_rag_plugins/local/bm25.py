"""A small BM25 index over (id, text) pairs using ``bm25s`` (framework-free)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BM25Index"]


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
        return [(self.ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
