"""LangChain as the command line, the benchmarks and ``from_documents`` use it: the object ``FRAMEWORK``.

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
from ..local.bm25 import BM25Index
from ..local.langchain_models import default_llm, local_llm
from ..local.langchain_stack import build_chroma_vectorstore
from ..tuning.fusion_config import FusionConfig
from .calibrate import calibrate_retriever
from .fingerprint import fingerprint_of
from .fusion_fanout import FusionFanout
from .host import doc_id, fetch_pool
from .hybrid_tuning import hybrid_retrievers
from .judge_labels import label_with_judge
from .question_gen import generate_calibration_questions
from .retriever import ConformalRetriever
from .tuned_host import LangChainTunedHost
from .tuned_units import unit_candidates

_HYBRID = re.compile(r"hybrid\(method=(\w+),weight=([0-9.eE+-]+),")


class LangChainFramework(LangChainTunedHost):
    """:class:`~conformal_rag_plugins.frameworks.FrameworkAdapter` for LangChain.

    ``searchable`` is a Chroma vector store; ``units`` are the corpus entries themselves (LangChain's
    BM25 side and gold ids read them).
    """

    def build_llm(self, kind: str, *, temperature: float, max_tokens: int) -> Any:
        if kind == "local":
            return local_llm(temperature=temperature, max_tokens=max_tokens)
        model = default_llm(temperature=temperature)
        model.max_tokens = max_tokens  # default_llm's 32 tokens are too few for a JSON question
        return model

    def build_hosts(self, request: IndexRequest) -> dict[FusionConfig | None, HostFetch]:
        """A dense host is the vector store itself; BM25 is the hybrid with no dense weight."""
        store, units = self.index_chunks(request.entries, client=request.client,
                                         collection_name=request.collection_name,
                                         show_progress=request.show_progress)  # fmt: skip
        pool_size = request.pool_size
        if request.kind == "dense":
            hosts: dict[FusionConfig | None, Any] = {None: store}
        elif request.kind == "bm25":
            bm25_only = hybrid_retrievers(store, units, [FusionConfig("zscore", 0.0)], pool_size=pool_size)
            hosts = {None: next(iter(bm25_only.values()))}
        else:
            hosts = dict(hybrid_retrievers(store, units, request.grid, pool_size=pool_size))

        def fetch_on(host: Any) -> Callable[[str], Any]:
            return lambda q: fetch_pool(host, q, pool_size)[0]

        return {fusion: (host, fetch_on(host)) for fusion, host in hosts.items()}

    def build_fanout(self, request: IndexRequest) -> Any:
        """LangChain's Chroma store shows no progress bar; its BM25 side reads the entries themselves."""
        entries = request.entries
        store = build_chroma_vectorstore(
            entries,
            client=request.client,
            collection_name=request.collection_name,
            warn_truncation=not request.whole_documents,
        )
        bm25 = BM25Index([e.id for e in entries], [e.text for e in entries])
        return FusionFanout(store, bm25, request.kind, request.grid, request.pool_sizes)

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
        """``("dense"|"hybrid", fusion)`` of a Chroma store or a hybrid retriever, else ``None``.

        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("langchain", "Chroma", "cosine", "m", 384, "1-distance", "dense")
        >>> FRAMEWORK.rebuildable_host(fp)
        ('dense', None)
        """
        if fingerprint.store == "Chroma" and fingerprint.retriever == "dense":
            return "dense", None
        fusion = fusion_in(_HYBRID, fingerprint.retriever)
        return ("hybrid", fusion) if fusion is not None else None

    def conformal_retriever(self, kind: str, host: Any, calibration: Any, **options: Any) -> Any:
        """A dense host is the vector store itself; any other host is a retriever."""
        if kind == "dense":
            return ConformalRetriever(calibration=calibration, vectorstore=host, **options)
        return ConformalRetriever(calibration=calibration, retriever=host, **options)

    def ask(self, retriever: Any) -> Callable[[str], list[Any]]:
        return retriever.invoke

    def bare_query(self, kind: str, host: Any, pool_size: int) -> Callable[[str], Any]:
        if kind == "dense":

            def bare(q: str) -> Any:
                return host.similarity_search_with_relevance_scores(q, k=pool_size)

            return bare
        return host.invoke

    def ids_and_texts(self, results: Sequence[Any]) -> list[tuple[str, str]]:
        return [(doc_id(d), d.page_content) for d in results]


#: The one LangChain adapter object (what ``from_documents`` and the command line pass to the neutral flows).
FRAMEWORK: FrameworkAdapter = LangChainFramework()
