"""Small-to-big retrieval in LangChain: score chunks, return their parent documents.

LangChain's pattern is the ``MultiVectorRetriever`` (and ``ParentDocumentRetriever``): chunks in
its ``vectorstore`` with the parent id in ``metadata[id_key]``, parents in its ``docstore``.
:func:`parent_host` reads those attributes (without importing ``langchain_classic``, not a base
dependency), or takes any scored host with ``parents=`` (a ``BaseStore`` or mapping) and
``id_key=``. Chunk scores are the host's own scale; parents are scored by
:func:`~conformal_rag_plugins.retrieval.parent_pools.to_parent_pool` at calibration and query time alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample
from ..datasets.gold_ids import gold_ids_error
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.parent_pools import (
    ParentCandidates,
    check_parent_aggregation,
    lift_gold_to_parents,
    parent_fingerprint,
    to_parent_pool,
)
from ..retrieval.pool_calibration import CandidatePool
from ..retrieval.serving import CHUNKS_METADATA_KEY
from .fingerprint import fingerprint_of
from .host import DOC_ID_KEY, Host, afetch_pool, doc_id, fetch_pairs, pool_from_pairs, quiet_relevance

#: Metadata key of a returned parent that lists the chunks which scored it.
CHUNKS_KEY = CHUNKS_METADATA_KEY
#: LangChain's default ``MultiVectorRetriever.id_key`` (also the key of a chunk's document, :data:`.host.DOC_ID_KEY`).
DEFAULT_ID_KEY = DOC_ID_KEY


def is_multi_vector(host: Any) -> bool:
    """Whether ``host`` looks like a ``MultiVectorRetriever`` (``vectorstore``, ``docstore``, ``id_key``)."""
    return (
        isinstance(host, BaseRetriever)
        and isinstance(getattr(host, "vectorstore", None), VectorStore)
        and getattr(host, "docstore", None) is not None
        and isinstance(getattr(host, "id_key", None), str)
    )


def with_chunks(parent: Document | str, parent_id: str, chunks: Sequence[dict[str, Any]]) -> Document:
    """A copy of a stored parent (never the store's object) with ``metadata['conformal_chunks']``.

    Examples
    --------
    >>> stored = Document(page_content="long text", metadata={"title": "T"})
    >>> out = with_chunks(stored, "A", [{"id": "a1", "score": 0.9, "text": "long"}])
    >>> out.id, out.metadata["conformal_chunks"][0]["id"], "conformal_chunks" in stored.metadata
    ('A', 'a1', False)
    """
    if isinstance(parent, Document):
        return Document(
            id=parent_id, page_content=parent.page_content, metadata=dict(parent.metadata) | {CHUNKS_KEY: list(chunks)}
        )
    return Document(id=parent_id, page_content=str(parent), metadata={CHUNKS_KEY: list(chunks)})


def _text(value: Any) -> str | None:
    """The text of a stored parent (a ``Document`` or a string), ``None`` when missing."""
    if value is None:
        return None
    return value.page_content if isinstance(value, Document) else str(value)


@dataclass(frozen=True)
class ParentHost:
    """A scored chunk host (``chunks``), the ``docstore`` of its parents and the ``id_key`` that links them.

    ``docstore`` maps parent id -> ``Document`` or text (``mget``/``amget`` when it has them); ``k`` is
    the host's own chunk top-k, checked against the pool size. ``search_kwargs``: a
    ``MultiVectorRetriever``'s other search arguments (e.g. ``filter``) for the relevance search;
    ``k`` is the pool size, and ``score_threshold`` and the MMR arguments are left out (the conformal
    threshold decides; scores are relevance scores).
    """

    chunks: Host
    docstore: Any
    id_key: str
    how: str = "max"
    k: int | None = None
    search_kwargs: dict[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> Fingerprint:
        """The chunk host's fingerprint with the parent unit appended (chunk and parent levels refuse each other)."""
        return parent_fingerprint(fingerprint_of(self.chunks), self.how)

    def check_pool_size(self, pool_size: int) -> None:
        """Raise when the host's own chunk top-k is below the calibrated pool."""
        if self.k is not None and self.k < pool_size:
            raise ConformalError(
                f"The host retrieves k={self.k} chunks but the calibration used a pool of {pool_size} chunks; "
                "query with the same pool."
            )

    @property
    def _store(self) -> VectorStore | None:
        return self.chunks if isinstance(self.chunks, VectorStore) else getattr(self.chunks, "vectorstore", None)

    def chunk_parents(self, ids: Sequence[str]) -> dict[str, str]:
        """Parent id of each chunk id the chunk store holds (others are left out)."""
        store = self._store
        if store is None or not ids:
            return {}
        try:
            found = store.get_by_ids(list(ids))
        except NotImplementedError:
            return {}
        return {d.id: str(d.metadata[self.id_key]) for d in found if d.id and d.metadata.get(self.id_key)}

    def _parent_ids(self, docs: Sequence[Document]) -> list[str]:
        parents: list[str | None] = [d.metadata.get(self.id_key) for d in docs]
        unknown = [doc_id(d) for d, p in zip(docs, parents, strict=True) if not p and doc_id(d)]
        looked_up = self.chunk_parents([str(i) for i in unknown]) if unknown else {}
        out = []
        for d, p in zip(docs, parents, strict=True):
            parent = p or looked_up.get(str(doc_id(d)))
            if not parent:
                raise ConformalError(
                    f"Chunk {doc_id(d)!r} has no parent: its metadata lacks {self.id_key!r}, so it cannot be "
                    "returned at parent level. Index chunks with the parent id in that key (as "
                    "ParentDocumentRetriever.add_documents does), pass the right id_key=, or calibrate at chunk level."
                )
            out.append(str(parent))
        return out

    def lookup(self, ids: Sequence[str]) -> dict[str, Any]:
        """Stored parents by id (missing ones are ``None``)."""
        ids = list(ids)
        if hasattr(self.docstore, "mget"):
            return dict(zip(ids, self.docstore.mget(ids), strict=True))
        return {i: self.docstore.get(i) for i in ids}

    async def alookup(self, ids: Sequence[str]) -> dict[str, Any]:
        """Async :meth:`lookup` (``amget`` when the store has it)."""
        if hasattr(self.docstore, "amget"):
            ids = list(ids)
            return dict(zip(ids, await self.docstore.amget(ids), strict=True))
        return self.lookup(ids)

    def _prepare(self, pool: CandidatePool, docs: Sequence[Document]) -> tuple[CandidatePool, dict[str, str]]:
        """Key the chunk pool by position (ids may be missing) and map each position to its parent."""
        keys = tuple(str(i) for i in range(len(docs)))
        return CandidatePool(keys, pool.texts, pool.scores), dict(zip(keys, self._parent_ids(docs), strict=True))

    def _finish(
        self, keyed: CandidatePool, parent_of: dict[str, str], docs: Sequence[Document], stored: Mapping[str, Any]
    ) -> tuple[ParentCandidates, list[Document]]:
        """The parent pool and the parent documents with their chunks, from the looked-up parents."""
        cands = to_parent_pool(keyed, parent_of, lambda pid: _text(stored.get(pid)), how=self.how)
        lists = cands.chunk_lists(keyed, [doc_id(d) for d in docs])
        return cands, [with_chunks(stored[pid], str(pid), c) for pid, c in zip(cands.pool.ids, lists, strict=True)]

    def candidates(self, pool: CandidatePool, docs: Sequence[Document]) -> tuple[ParentCandidates, list[Document]]:
        """Parent pool of one best-first chunk pool, and the parent documents with their chunks."""
        keyed, parent_of = self._prepare(pool, docs)
        return self._finish(keyed, parent_of, docs, self.lookup(dict.fromkeys(parent_of.values())))

    def _pairs(self, query: str, pool_size: int, callbacks: Any) -> list[tuple[Document, float]]:
        """The host's top chunks and scores (a ``MultiVectorRetriever``'s ``search_kwargs`` applied)."""
        if not self.search_kwargs or not isinstance(self.chunks, VectorStore):
            return fetch_pairs(self.chunks, query, pool_size, callbacks=callbacks)
        with quiet_relevance():
            return self.chunks.similarity_search_with_relevance_scores(query, k=pool_size, **self.search_kwargs)

    def fetch(self, query: str, pool_size: int, *, callbacks: Any = None) -> tuple[list[Document], np.ndarray]:
        """The parents of the host's top ``pool_size`` chunks, best first, and their scores."""
        cands, parents = self.candidates(*pool_from_pairs(self._pairs(query, pool_size, callbacks)))
        return parents, cands.pool.scores

    async def afetch(self, query: str, pool_size: int, *, callbacks: Any = None) -> tuple[list[Document], np.ndarray]:
        """Async :meth:`fetch` (async search and ``amget``)."""
        if self.search_kwargs:
            with quiet_relevance():
                search = self.chunks.asimilarity_search_with_relevance_scores  # type: ignore[union-attr]
                pairs = await search(query, k=pool_size, **self.search_kwargs)
            pool, docs = pool_from_pairs(pairs)
        else:
            pool, docs = await afetch_pool(self.chunks, query, pool_size, callbacks=callbacks)
        keyed, parent_of = self._prepare(pool, docs)
        stored = await self.alookup(dict.fromkeys(parent_of.values()))
        cands, parents = self._finish(keyed, parent_of, docs, stored)
        return parents, cands.pool.scores

    def fetch_pool(self, query: str, pool_size: int) -> CandidatePool:
        """The parent-level candidate pool of one query (what calibration observes)."""
        return self.candidates(*pool_from_pairs(self._pairs(query, pool_size, None)))[0].pool

    def lift_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        """Replace gold chunk ids by their parents' ids (parent ids are kept as they are)."""
        return lift_gold_to_parents(examples, self.chunk_parents(sorted({g for ex in examples for g in ex.gold_ids})))

    def known_parents(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the docstore holds."""
        return {i for i, v in self.lookup(ids).items() if v is not None}


#: ``MultiVectorRetriever.search_kwargs`` not passed to the relevance search (see :class:`ParentHost`).
_NOT_PASSED = frozenset({"k", "score_threshold", "fetch_k", "lambda_mult"})


def _search_kwargs(host: Any) -> dict[str, Any]:
    kwargs = getattr(host, "search_kwargs", None) or {}
    return {k: v for k, v in kwargs.items() if k not in _NOT_PASSED}


def _top_k(host: Any) -> int | None:
    kwargs = getattr(host, "search_kwargs", None)
    k = kwargs.get("k") if isinstance(kwargs, dict) else getattr(host, "k", None)
    return k if isinstance(k, int) else None


def parent_host(
    host: Host,
    *,
    parents: Any = None,
    id_key: str | None = None,
    how: str = "max",
) -> ParentHost | None:
    """The parent-level view of ``host``, or ``None`` for a chunk-level host.

    A ``MultiVectorRetriever`` / ``ParentDocumentRetriever`` gives its ``vectorstore``, ``docstore``
    and ``id_key``; any other scored host needs ``parents`` (parent id -> ``Document``, also
    overriding the docstore). ``id_key`` defaults to the retriever's, else ``"doc_id"``; ``how="max"``
    ranks a parent where its best chunk ranks, as ``MultiVectorRetriever`` does. An unknown ``how``,
    ``parents`` neither a store nor a mapping, or ``id_key``/non-default ``how`` without parents
    raise :class:`ConformalError`.

    Examples
    --------
    >>> parent_host(object(), parents=None) is None
    True
    """
    check_parent_aggregation(how)
    if parents is not None and not (hasattr(parents, "mget") or isinstance(parents, Mapping)):
        raise ConformalError(
            f"parents= must be a LangChain BaseStore (e.g. InMemoryStore) or a mapping of parent id -> Document, "
            f"got {type(parents).__name__}."
        )
    if is_multi_vector(host):
        store = parents if parents is not None else host.docstore  # type: ignore[union-attr]
        return ParentHost(
            host.vectorstore,  # type: ignore[union-attr]
            store,
            id_key or host.id_key,  # type: ignore[union-attr]
            how,
            _top_k(host),
            _search_kwargs(host),
        )
    if parents is None:
        if id_key is not None or how != "max":
            raise ConformalError(
                "id_key= and parent_aggregation= need parents= (the store of parent documents), or a "
                "MultiVectorRetriever / ParentDocumentRetriever host."
            )
        return None
    return ParentHost(host, parents, id_key or DEFAULT_ID_KEY, how, _top_k(host))


def parent_examples(source: ParentHost, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
    """Lift gold chunk ids to parents; a gold id neither a chunk nor a stored parent raises ``CalibrationError``."""
    lifted = source.lift_gold(examples)
    gold = sorted({g for ex in lifted for g in ex.gold_ids})
    missing = sorted(set(gold) - source.known_parents(gold)) if gold else []
    if missing:
        raise gold_ids_error(
            missing,
            n_chunk_ids=len(gold) - len(missing),
            document_key=f'the chunk\'s metadata["{source.id_key}"] (the parent id)',
            also="parent ids (docstore keys)",
        )
    return lifted
