"""LlamaIndex as the command line, the benchmarks and ``from_documents`` use it: the object ``FRAMEWORK``.

Each method calls the adapter function it names (importing the package already loads them all; no
model and no Chroma client is made before a method runs);
:class:`~conformal_rag_plugins.frameworks.FrameworkAdapter` says what the methods are. The command
line finds ``FRAMEWORK`` in ``commands/framework_registry.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ..frameworks import FrameworkAdapter, HostFetch, IndexRequest, fusion_in
from ..local.llamaindex_models import default_llm, local_llm
from ..local.llamaindex_stack import build_chroma_index
from ..tuning.fusion_config import FusionConfig
from .calibrate import calibrate_retriever
from .fingerprint import fingerprint_of
from .fusion_fanout import FusionFanout
from .host import pool_from_nodes
from .hybrid_tuning import hybrid_retrievers
from .judge_labels import label_with_judge
from .question_gen import generate_calibration_questions
from .retriever import ConformalRetriever
from .tuned_host import LlamaIndexTunedHost
from .tuned_units import unit_candidates

_FUSION = re.compile(r"fusion\(mode=(\w+),weights=([0-9.eE+-]+),")


class LlamaIndexFramework(LlamaIndexTunedHost):
    """:class:`~conformal_rag_plugins.frameworks.FrameworkAdapter` for LlamaIndex.

    ``searchable`` is a ``VectorStoreIndex``; ``units`` are its nodes (what BM25 and gold ids read).
    """

    def build_llm(self, kind: str, *, temperature: float, max_tokens: int) -> Any:
        if kind == "local":
            return local_llm(temperature=temperature, max_new_tokens=max_tokens)
        model = default_llm(temperature=temperature)
        model.max_tokens = max_tokens  # default_llm's 32 tokens are too few for a JSON question
        return model

    def build_hosts(self, request: IndexRequest) -> dict[FusionConfig | None, HostFetch]:
        index, nodes = self.index_chunks(request.entries, client=request.client,
                                         collection_name=request.collection_name,
                                         show_progress=request.show_progress)  # fmt: skip
        pool_size = request.pool_size
        if request.kind == "dense":
            hosts: dict[FusionConfig | None, Any] = {None: index.as_retriever(similarity_top_k=pool_size)}
        elif request.kind == "bm25":
            from llama_index.retrievers.bm25 import BM25Retriever

            hosts = {None: BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=pool_size)}
        else:
            hosts = dict(hybrid_retrievers(index, nodes, request.grid, pool_size=pool_size))

        def fetch_on(host: Any) -> Callable[[str], Any]:
            return lambda q: pool_from_nodes(host.retrieve(q))[0]

        return {fusion: (host, fetch_on(host)) for fusion, host in hosts.items()}

    def build_fanout(self, request: IndexRequest) -> Any:
        index, nodes = build_chroma_index(
            request.entries,
            client=request.client,
            collection_name=request.collection_name,
            show_progress=request.show_progress,
            warn_truncation=not request.whole_documents,
        )
        return FusionFanout(index, nodes, request.kind, request.grid, request.pool_sizes)

    def calibrate_retriever(self, host: Any, examples: Sequence[Any], **options: Any) -> Any:
        return calibrate_retriever(host, examples, **options)

    def unit_candidates(
        self,
        searchable: Any,
        units: Any,
        examples: Sequence[Any],
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
    ) -> Any:
        return unit_candidates(searchable, units, examples, grid, pool_sizes)

    def label_with_judge(
        self, host: Any, examples: Sequence[Any], model: Any, budget: int, **options: Any
    ) -> tuple[list[Any], Any]:
        return label_with_judge(host, examples, model, budget, **options)

    def generate_questions(self, chunks: Sequence[Any], model: Any, n: int, **options: Any) -> tuple[list, Any]:
        return generate_calibration_questions(chunks, model, n, **options)

    def fingerprint_of(self, host: Any) -> Any:
        return fingerprint_of(host)

    def rebuildable_host(self, fingerprint: Any) -> tuple[str, FusionConfig | None] | None:
        """``("dense"|"bm25"|"hybrid", fusion)`` of a Chroma/BM25/fusion host, else ``None``.

        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "m", 384, "1-distance",
        ...                  "fusion(mode=dist_based_score,weights=0.5,k=50)")
        >>> FRAMEWORK.rebuildable_host(fp)
        ('hybrid', FusionConfig(method='zscore', weight=0.5))
        """
        retriever = fingerprint.retriever
        if fingerprint.store == "ChromaVectorStore" and retriever.startswith("dense"):
            return "dense", None
        if retriever == "bm25":
            return "bm25", None
        fusion = fusion_in(_FUSION, retriever)
        return ("hybrid", fusion) if fusion is not None else None

    def conformal_retriever(self, kind: str, host: Any, calibration: Any, **options: Any) -> Any:
        return ConformalRetriever(calibration, retriever=host, **options)

    def ask(self, retriever: Any) -> Callable[[str], list[Any]]:
        return retriever.retrieve

    def bare_query(self, kind: str, host: Any, pool_size: int) -> Callable[[str], Any]:
        return host.retrieve

    def ids_and_texts(self, results: Sequence[Any]) -> list[tuple[str, str]]:
        from llama_index.core.schema import MetadataMode

        return [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE)) for n in results]


#: The one LlamaIndex adapter object (what ``from_documents`` and the command line pass to the neutral flows).
FRAMEWORK: FrameworkAdapter = LlamaIndexFramework()
