"""A LangChain vector store, retriever or parent setup read as a :class:`~..retrieval.host.RetrievalHost`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..datasets.examples import CalibrationExample
from ..labelling.gold_ids import gold_on_chunks
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.host import Parents
from ..retrieval.pool_calibration import CandidatePool
from .fingerprint import fingerprint_of
from .host import Host, all_ids, existing_ids, fetch_pool, gold_lookup, quiet_relevance, resolve_pool_size
from .parent_retrieval import parent_examples, parent_host


@dataclass(frozen=True)
class LangChainHost:
    """A LangChain vector store or scored retriever (optionally at parent level) read as a ``RetrievalHost``.

    What :func:`calibrate_retriever` builds; give it to
    :class:`~conformal_rag_plugins.RetrievalConformalizer` to calibrate the MAPIE way. Build it with
    :meth:`of` (pool: ``pool_size``, else the host's ``k``, else 50).

    Examples
    --------
    >>> LangChainHost.of(vectorstore, pool_size=50).fetch("Who founded Normandy?").ids[:2]  # doctest: +SKIP
    ('Normans#0', 'Normans#3')
    >>> RetrievalConformalizer(0.9).conformalize(LangChainHost.of(vectorstore), examples).threshold_  # doctest: +SKIP
    0.07...
    """

    host: Host
    pool_size: int
    source: Any = None

    @classmethod
    def of(cls, host: Host, *, pool_size: int | None = None, parents: Parents | None = None) -> LangChainHost:
        """Read a host (pool: ``pool_size``, else its ``k``, else 50).

        A ``MultiVectorRetriever`` / ``ParentDocumentRetriever`` brings its own docstore and ``id_key``.
        """
        spec = parents if parents is not None else Parents()
        source = parent_host(host, parents=spec.store, id_key=spec.id_key, how=spec.aggregation)
        return cls(host, resolve_pool_size(host if source is None else source, pool_size), source)

    def fetch(self, question: str, group_key: str | None = None) -> CandidatePool:
        with quiet_relevance():
            if self.source is not None:
                return self.source.fetch_pool(question, self.pool_size)
            pool, docs = fetch_pool(self.host, question, self.pool_size)
        if group_key is None:
            return pool
        return replace(pool, groups=tuple(d.metadata.get(group_key) for d in docs))

    def existing_ids(self, ids: Sequence[str]) -> set[str] | None:
        return existing_ids(self.host, ids) if self.source is None else self.source.known_parents(ids)

    def all_ids(self) -> list[str] | None:
        return all_ids(self.host)

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(self.host) if self.source is None else self.source.fingerprint()

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        if self.source is not None:
            return parent_examples(self.source, examples)
        return gold_on_chunks(examples, gold_lookup(self.host))
