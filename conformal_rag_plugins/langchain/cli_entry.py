"""LangChain's entry in the framework registry (``conformal_rag_plugins/frameworks.py``).

What ``conformal-rag`` and the benchmarks ask of LangChain, in one place: the splitter, the
LLM, the Chroma store and its dense, BM25 and hybrid hosts, calibration, labelling, question
generation, fingerprints and ``ConformalRetriever``. The registry imports this module only when
LangChain is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ..tuning.tuned_calibration import FusionConfig

_MODES = {"dist_based_score": "zscore", "relative_score": "minmax"}
_HYBRID = re.compile(r"hybrid\(method=(\w+),weight=([0-9.eE+-]+),")


class LangChainEntry:
    """:class:`~conformal_rag_plugins.frameworks.FrameworkAdapter` for LangChain."""

    name = "langchain"

    def chunk_entries(self, entries: Sequence[Any], *, chunk_size: int | None, chunk_overlap: int | None) -> list:
        from .text_splitting import chunk_entries

        return chunk_entries(entries, chunk_size=chunk_size, chunk_overlap=chunk_overlap)

    def build_llm(self, kind: str, *, temperature: float, max_tokens: int) -> Any:
        from ..local import langchain_models as llm

        if kind == "local":
            return llm.local_llm(temperature=temperature, max_tokens=max_tokens)
        model = llm.default_llm(temperature=temperature)
        model.max_tokens = max_tokens  # default_llm's 32 tokens are too few for a JSON question
        return model

    def index_chunks(
        self, entries: Sequence[Any], *, client: Any, collection_name: str, show_progress: bool = False
    ) -> tuple[Any, Any]:
        """``(Chroma store, entries)``: LangChain's BM25 side and gold ids read the entries themselves."""
        from ..local.langchain_stack import build_chroma_vectorstore

        return build_chroma_vectorstore(entries, client=client, collection_name=collection_name), entries

    def build_hosts(
        self,
        kind: str,
        entries: Sequence[Any],
        *,
        grid: Sequence[FusionConfig],
        pool_size: int,
        client: Any,
        collection_name: str,
        show_progress: bool = False,
    ) -> dict[FusionConfig | None, tuple[Any, Callable[[str], Any]]]:
        from .host import fetch_pool
        from .hybrid_tuning import hybrid_retrievers

        store, _ = self.index_chunks(entries, client=client, collection_name=collection_name)
        hosts: dict[FusionConfig | None, Any]
        if kind == "dense":
            hosts = {None: store}
        elif kind == "bm25":
            bm25_only = hybrid_retrievers(store, entries, [FusionConfig("zscore", 0.0)], pool_size=pool_size)
            hosts = {None: next(iter(bm25_only.values()))}
        else:
            hosts = dict(hybrid_retrievers(store, entries, grid, pool_size=pool_size))

        def with_fetch(host: Any) -> tuple[Any, Callable[[str], Any]]:
            return host, lambda q: fetch_pool(host, q, pool_size)[0]

        return {c: with_fetch(h) for c, h in hosts.items()}

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

    def calibrate_retriever(self, host: Any, examples: Sequence[Any], **options: Any) -> Any:
        from .calibrate import calibrate_retriever

        return calibrate_retriever(host, examples, **options)

    def calibrate_hybrid_retriever(
        self, searchable: Any, units: Any, examples: Sequence[Any], **options: Any
    ) -> tuple[Any, Any]:
        from .hybrid_tuning import calibrate_hybrid_retriever

        return calibrate_hybrid_retriever(searchable, units, examples, **options)

    def unit_candidates(
        self,
        searchable: Any,
        units: Any,
        examples: Sequence[Any],
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
    ) -> Any:
        from .tuned_units import unit_candidates

        return unit_candidates(searchable, units, examples, grid, pool_sizes)

    def label_with_judge(
        self, host: Any, examples: Sequence[Any], model: Any, budget: int, **options: Any
    ) -> tuple[list, Any]:
        from .judge_labels import label_with_judge

        return label_with_judge(host, examples, model, budget, **options)

    def generate_questions(self, chunks: Sequence[Any], model: Any, n: int, **options: Any) -> tuple[list, Any]:
        from .question_gen import generate_calibration_questions

        return generate_calibration_questions(chunks, model, n, **options)

    def fingerprint_of(self, host: Any) -> Any:
        from .fingerprint import fingerprint_of

        return fingerprint_of(host)

    def rebuildable_host(self, fingerprint: Any) -> tuple[str, FusionConfig | None] | None:
        """``("dense"|"hybrid", fusion)`` of a Chroma store or a hybrid retriever, else ``None``.

        Examples
        --------
        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("langchain", "Chroma", "cosine", "m", 384, "1-distance", "dense")
        >>> LangChainEntry().rebuildable_host(fp)
        ('dense', None)
        """
        retriever = fingerprint.retriever
        if fingerprint.store == "Chroma" and retriever == "dense":
            return "dense", None
        match = _HYBRID.match(retriever)
        if match:
            return "hybrid", FusionConfig(_MODES.get(match.group(1), match.group(1)), float(match.group(2)))
        return None

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
