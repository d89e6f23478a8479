"""The part of LlamaIndex that builds the tuned host: chunk, index in Chroma, tune and calibrate the hybrid.

``ConformalRetriever.from_documents`` (through ``from_documents.py``) and the command line (through
``framework.py``, whose ``FRAMEWORK`` extends this class) take this one route
(:func:`~conformal_rag_plugins.frameworks.tuned_host_from_entries`). It never imports the retriever,
so ``retriever -> from_documents -> tuned_host`` runs one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..local.llamaindex_stack import build_chroma_index
from .hybrid_tuning import calibrate_hybrid_retriever, hybrid_from_calibration
from .text_splitting import chunk_entries


class LlamaIndexTunedHost:
    """:class:`~conformal_rag_plugins.frameworks.TunedHostParts` for LlamaIndex."""

    name = "llamaindex"

    def chunk_entries(self, entries: Sequence[Any], *, chunk_size: int | None, chunk_overlap: int | None) -> list[Any]:
        return chunk_entries(entries, chunk_size=chunk_size, chunk_overlap=chunk_overlap)

    def index_chunks(
        self, entries: Sequence[Any], *, client: Any, collection_name: str, show_progress: bool = False
    ) -> tuple[Any, Any]:
        return build_chroma_index(entries, client=client, collection_name=collection_name, show_progress=show_progress)

    def calibrate_hybrid_retriever(
        self, searchable: Any, units: Any, examples: Sequence[Any], **options: Any
    ) -> tuple[Any, Any]:
        return calibrate_hybrid_retriever(searchable, units, examples, **options)

    def hybrid_from_calibration(self, searchable: Any, units: Any, calibration: Any) -> Any:
        return hybrid_from_calibration(searchable, units, calibration)


#: The one instance ``from_documents`` passes to the shared flow.
TUNED_HOST = LlamaIndexTunedHost()
