"""LangChain's entry in the framework registry (``conformal_rag_plugins/frameworks.py``), imported only when asked for.

What only calls an adapter function is inherited from :class:`~conformal_rag_plugins.frameworks.RegisteredEntry`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ..frameworks import RegisteredEntry
from ..tuning.tuned_calibration import FusionConfig

_HYBRID = re.compile(r"hybrid\(method=(\w+),weight=([0-9.eE+-]+),")


class LangChainEntry(RegisteredEntry):
    """:class:`~conformal_rag_plugins.frameworks.FrameworkAdapter` for LangChain."""

    name = "langchain"
    package = "conformal_rag_plugins.langchain"
    models = "conformal_rag_plugins.local.langchain_models"

    def index_chunks(
        self, entries: Sequence[Any], *, client: Any, collection_name: str, show_progress: bool = False
    ) -> tuple[Any, Any]:
        """``(Chroma store, entries)``: LangChain's BM25 side and gold ids read the entries themselves."""
        from ..local.langchain_stack import build_chroma_vectorstore

        return build_chroma_vectorstore(entries, client=client, collection_name=collection_name), entries

    def hosts_on(
        self, kind: str, searchable: Any, units: Any, grid: Sequence[FusionConfig], pool_size: int
    ) -> dict[FusionConfig | None, Any]:
        from .hybrid_tuning import hybrid_retrievers

        if kind == "dense":
            return {None: searchable}
        if kind == "bm25":
            bm25_only = hybrid_retrievers(searchable, units, [FusionConfig("zscore", 0.0)], pool_size=pool_size)
            return {None: next(iter(bm25_only.values()))}
        return dict(hybrid_retrievers(searchable, units, grid, pool_size=pool_size))

    def fetch_on(self, host: Any, pool_size: int) -> Callable[[str], Any]:
        from .host import fetch_pool

        return lambda q: fetch_pool(host, q, pool_size)[0]

    def build_fanout(
        self,
        kind: str,
        entries: Sequence[Any],
        *,
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
        client: Any,
        collection_name: str,
        show_progress: bool = False,
        whole_documents: bool = False,
    ) -> Any:
        from ..local.bm25 import BM25Index
        from ..local.langchain_stack import build_chroma_vectorstore
        from .fusion_fanout import FusionFanout

        store = build_chroma_vectorstore(
            entries, client=client, collection_name=collection_name, warn_truncation=not whole_documents
        )
        bm25 = BM25Index([e.id for e in entries], [e.text for e in entries])
        return FusionFanout(store, bm25, kind, grid, pool_sizes)

    def rebuildable_host(self, fingerprint: Any) -> tuple[str, FusionConfig | None] | None:
        """``("dense"|"hybrid", fusion)`` of a Chroma store or a hybrid retriever, else ``None``.

        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("langchain", "Chroma", "cosine", "m", 384, "1-distance", "dense")
        >>> LangChainEntry().rebuildable_host(fp)
        ('dense', None)
        """
        if fingerprint.store == "Chroma" and fingerprint.retriever == "dense":
            return "dense", None
        fusion = self.fusion_in(_HYBRID, fingerprint.retriever)
        return ("hybrid", fusion) if fusion is not None else None

    def conformal_retriever(self, kind: str, host: Any, calibration: Any, **options: Any) -> Any:
        """A dense host is the vector store itself; any other host is a retriever."""
        from .retriever import ConformalRetriever

        key = "vectorstore" if kind == "dense" else "retriever"
        return ConformalRetriever(calibration=calibration, **{key: host}, **options)

    def ask(self, retriever: Any) -> Callable[[str], list[Any]]:
        return retriever.invoke

    def bare_query(self, kind: str, host: Any, pool_size: int) -> Callable[[str], Any]:
        if kind == "dense":

            def bare(q: str) -> Any:
                return host.similarity_search_with_relevance_scores(q, k=pool_size)

            return bare
        return host.invoke

    def ids_and_texts(self, results: Sequence[Any]) -> list[tuple[str, str]]:
        from .host import doc_id

        return [(doc_id(d), d.page_content) for d in results]
