"""A LlamaIndex index, retriever or parent setup read as a :class:`~..retrieval.host.RetrievalHost`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever

from ..datasets.examples import CalibrationExample
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.host import Parents
from ..retrieval.pool_calibration import CandidatePool
from .fingerprint import fingerprint_of
from .host import all_ids, existing_ids, gold_on_chunks, pool_from_nodes, resolve_host
from .parent_retrieval import resolve_parent_level


@dataclass(frozen=True)
class LlamaIndexHost:
    """A LlamaIndex index or retriever (``level``: optionally at parent level) read as a ``RetrievalHost``.

    What :func:`calibrate_retriever` builds; give it to
    :class:`~conformal_rag_plugins.RetrievalConformalizer` to calibrate the MAPIE way. Build it with
    :meth:`of` (an index is queried with ``as_retriever(similarity_top_k=pool_size)``, default 50).

    Examples
    --------
    >>> LlamaIndexHost.of(index, pool_size=50).fetch("Who founded Normandy?").ids[:2]  # doctest: +SKIP
    ('Normans#0', 'Normans#3')
    >>> RetrievalConformalizer(0.9).conformalize(LlamaIndexHost.of(index), examples).threshold_  # doctest: +SKIP
    0.07...
    """

    retriever: BaseRetriever
    pool_size: int
    level: Any = None

    @classmethod
    def of(cls, host: Any, *, pool_size: int | None = None, parents: Parents | None = None) -> LlamaIndexHost:
        """Read an index (``as_retriever(similarity_top_k=pool_size)``, default 50) or retriever.

        An ``AutoMergingRetriever`` or ``RecursiveRetriever`` host brings its own parents.
        """
        spec = parents if parents is not None else Parents()
        level = resolve_parent_level(host, spec.store, spec.aggregation)
        retriever, size = resolve_host(host if level is None else level.retriever, pool_size)
        return cls(retriever, size, level)

    def fetch(self, question: str, group_key: str | None = None) -> CandidatePool:
        nodes = self.retriever.retrieve(question)
        if self.level is not None:
            return self.level.parent_pool(nodes)
        pool, ordered = pool_from_nodes(nodes)
        if group_key is None:
            return pool
        return replace(pool, groups=tuple(n.node.metadata.get(group_key) for n in ordered))

    def existing_ids(self, ids: Sequence[str]) -> set[str] | None:
        return existing_ids(self.retriever, ids)

    def all_ids(self) -> list[str] | None:
        return all_ids(self.retriever)

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(self.retriever) if self.level is None else self.level.fingerprint(self.retriever)

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        if self.level is not None:
            return self.level.lift_gold(list(examples), self.retriever)
        return gold_on_chunks(self.retriever, list(examples))
