"""LlamaIndex's entry in the framework registry (``conformal_rag_plugins/frameworks.py``), imported only when asked for.

What only calls an adapter function is inherited from :class:`~conformal_rag_plugins.frameworks.RegisteredEntry`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ..frameworks import RegisteredEntry
from ..tuning.tuned_calibration import FusionConfig

_FUSION = re.compile(r"fusion\(mode=(\w+),weights=([0-9.eE+-]+),")


class LlamaIndexEntry(RegisteredEntry):
    """:class:`~conformal_rag_plugins.frameworks.FrameworkAdapter` for LlamaIndex."""

    name = "llamaindex"
    package = "conformal_rag_plugins.llamaindex"
    models = "conformal_rag_plugins.local.llamaindex_models"
    max_tokens_keyword = "max_new_tokens"

    def index_chunks(
        self, entries: Sequence[Any], *, client: Any, collection_name: str, show_progress: bool = False
    ) -> tuple[Any, Any]:
        from ..local.llamaindex_stack import build_chroma_index

        return build_chroma_index(entries, client=client, collection_name=collection_name, show_progress=show_progress)

    def hosts_on(
        self, kind: str, searchable: Any, units: Any, grid: Sequence[FusionConfig], pool_size: int
    ) -> dict[FusionConfig | None, Any]:
        from .hybrid_tuning import hybrid_retrievers

        if kind == "dense":
            return {None: searchable.as_retriever(similarity_top_k=pool_size)}
        if kind == "bm25":
            from llama_index.retrievers.bm25 import BM25Retriever

            return {None: BM25Retriever.from_defaults(nodes=units, similarity_top_k=pool_size)}
        return dict(hybrid_retrievers(searchable, units, grid, pool_size=pool_size))

    def fetch_on(self, host: Any, pool_size: int) -> Callable[[str], Any]:
        from .host import pool_from_nodes

        return lambda q: pool_from_nodes(host.retrieve(q))[0]

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
        from ..local.llamaindex_stack import build_chroma_index
        from .fusion_fanout import FusionFanout

        index, nodes = build_chroma_index(
            entries,
            client=client,
            collection_name=collection_name,
            show_progress=show_progress,
            warn_truncation=not whole_documents,
        )
        return FusionFanout(index, nodes, kind, grid, pool_sizes)

    def rebuildable_host(self, fingerprint: Any) -> tuple[str, FusionConfig | None] | None:
        """``("dense"|"bm25"|"hybrid", fusion)`` of a Chroma/BM25/fusion host, else ``None``.

        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "m", 384, "1-distance",
        ...                  "fusion(mode=dist_based_score,weights=0.5,k=50)")
        >>> LlamaIndexEntry().rebuildable_host(fp)
        ('hybrid', FusionConfig(method='zscore', weight=0.5))
        """
        retriever = fingerprint.retriever
        if fingerprint.store == "ChromaVectorStore" and retriever.startswith("dense"):
            return "dense", None
        if retriever == "bm25":
            return "bm25", None
        fusion = self.fusion_in(_FUSION, retriever)
        return ("hybrid", fusion) if fusion is not None else None

    def conformal_retriever(self, kind: str, host: Any, calibration: Any, **options: Any) -> Any:
        from .retriever import ConformalRetriever

        return ConformalRetriever(calibration, retriever=host, **options)

    def ask(self, retriever: Any) -> Callable[[str], list[Any]]:
        return retriever.retrieve

    def bare_query(self, kind: str, host: Any, pool_size: int) -> Callable[[str], Any]:
        return host.retrieve

    def ids_and_texts(self, results: Sequence[Any]) -> list[tuple[str, str]]:
        from llama_index.core.schema import MetadataMode

        return [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE)) for n in results]
