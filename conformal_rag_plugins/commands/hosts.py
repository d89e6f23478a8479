"""Build a host retriever (dense, BM25 or hybrid) for either framework on the local stack."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..datasets.examples import CorpusEntry
from ..retrieval.pool_calibration import CandidatePool
from ..tuning.tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig

__all__ = ["FRAMEWORKS", "RETRIEVERS", "HostBundle", "build_fanout", "build_host", "build_hosts", "corpus_key"]

FRAMEWORKS = ("llamaindex", "langchain")
RETRIEVERS = ("dense", "bm25", "hybrid")


@dataclass
class HostBundle:
    """A host retriever plus a ``fetch(question) -> CandidatePool`` on its own scale."""

    framework: str
    kind: str
    host: Any
    pool_size: int
    fetch: Callable[[str], CandidatePool]
    fusion: FusionConfig | None = None


def corpus_key(entries: Sequence[CorpusEntry]) -> str:
    """Short content hash naming the collection of a corpus."""
    h = hashlib.sha1()
    for e in entries:
        h.update(e.id.encode())
        h.update(b"\0")
        h.update(e.text.encode())
    return h.hexdigest()[:12]


def _llamaindex_hosts(
    kind: str, entries: Sequence[CorpusEntry], grid: Sequence[FusionConfig], pool_size: int, client: Any, progress: bool
) -> dict[FusionConfig | None, HostBundle]:
    from ..llamaindex.host import pool_from_nodes
    from ..llamaindex.hybrid_tuning import hybrid_retrievers
    from ..local.llamaindex_stack import build_chroma_index

    name = f"crp-llamaindex-{corpus_key(entries)}"
    index, nodes = build_chroma_index(entries, client=client, collection_name=name, show_progress=progress)
    hosts: dict[FusionConfig | None, Any]
    if kind == "dense":
        hosts = {None: index.as_retriever(similarity_top_k=pool_size)}
    elif kind == "bm25":
        from llama_index.retrievers.bm25 import BM25Retriever

        hosts = {None: BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=pool_size)}
    else:
        hosts = dict(hybrid_retrievers(index, nodes, grid, pool_size=pool_size))

    def bundle(config: FusionConfig | None, host: Any) -> HostBundle:
        return HostBundle("llamaindex", kind, host, pool_size, lambda q: pool_from_nodes(host.retrieve(q))[0], config)

    return {c: bundle(c, h) for c, h in hosts.items()}


def _langchain_hosts(
    kind: str, entries: Sequence[CorpusEntry], grid: Sequence[FusionConfig], pool_size: int, client: Any
) -> dict[FusionConfig | None, HostBundle]:
    from ..langchain.host import fetch_pool
    from ..langchain.hybrid_tuning import hybrid_retrievers
    from ..local.langchain_stack import build_chroma_vectorstore

    store = build_chroma_vectorstore(entries, client=client, collection_name=f"crp-langchain-{corpus_key(entries)}")
    hosts: dict[FusionConfig | None, Any]
    if kind == "dense":
        hosts = {None: store}
    elif kind == "bm25":
        hosts = {
            None: next(
                iter(hybrid_retrievers(store, entries, [FusionConfig("zscore", 0.0)], pool_size=pool_size).values())
            )
        }
    else:
        hosts = dict(hybrid_retrievers(store, entries, grid, pool_size=pool_size))

    def bundle(config: FusionConfig | None, host: Any) -> HostBundle:
        return HostBundle("langchain", kind, host, pool_size, lambda q: fetch_pool(host, q, pool_size)[0], config)

    return {c: bundle(c, h) for c, h in hosts.items()}


def build_hosts(
    framework: str,
    kind: str,
    entries: Sequence[CorpusEntry],
    *,
    grid: Sequence[FusionConfig] = DEFAULT_FUSION_GRID,
    pool_size: int = 50,
    client: Any = None,
    show_progress: bool = False,
) -> dict[FusionConfig | None, HostBundle]:
    """Index ``entries`` once and build one host per fusion configuration.

    Dense and BM25 hosts have no fusion setting: the result is ``{None: bundle}``.
    Hybrid hosts share the index and the BM25 side.
    """
    if framework not in FRAMEWORKS or kind not in RETRIEVERS:
        raise ValueError(f"framework must be one of {FRAMEWORKS} and retriever one of {RETRIEVERS}.")
    if framework == "llamaindex":
        return _llamaindex_hosts(kind, entries, grid, pool_size, client, show_progress)
    return _langchain_hosts(kind, entries, grid, pool_size, client)


def build_host(
    framework: str,
    kind: str,
    entries: Sequence[CorpusEntry],
    *,
    pool_size: int = 50,
    client: Any = None,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    fusion: FusionConfig | None = None,
    show_progress: bool = False,
) -> HostBundle:
    """Index ``entries`` in Chroma (embeddings cached) and wrap the chosen retriever.

    A hybrid host uses ``fusion`` (default z-score with ``dense_weight``).
    """
    config = fusion or FusionConfig("zscore", dense_weight)
    hosts = build_hosts(
        framework, kind, entries, grid=[config], pool_size=pool_size, client=client, show_progress=show_progress
    )
    return next(iter(hosts.values()))


def build_fanout(
    framework: str,
    kind: str,
    entries: Sequence[CorpusEntry],
    *,
    grid: Sequence[FusionConfig],
    pool_sizes: Sequence[int],
    client: Any = None,
    show_progress: bool = False,
    whole_documents: bool = False,
) -> Callable[[str], dict[tuple[FusionConfig | None, int], CandidatePool]]:
    """Index ``entries`` once and return ``fetch(question) -> {(fusion or None, pool size): pool}``.

    One dense and one BM25 search per question serve every fusion setting and pool size
    (``llamaindex/fusion_fanout.py``, ``langchain/fusion_fanout.py``). ``whole_documents``
    marks the ``document`` unit's index, whose long entries are embedded past the window on
    purpose (beside a chunked index), so the split-them-first warning is not raised for it.
    """
    if framework not in FRAMEWORKS or kind not in RETRIEVERS:
        raise ValueError(f"framework must be one of {FRAMEWORKS} and retriever one of {RETRIEVERS}.")
    name = f"crp-{framework}-{corpus_key(entries)}"
    if framework == "llamaindex":
        from ..llamaindex.fusion_fanout import FusionFanout
        from ..local.llamaindex_stack import build_chroma_index

        index, nodes = build_chroma_index(
            entries,
            client=client,
            collection_name=name,
            show_progress=show_progress,
            warn_truncation=not whole_documents,
        )
        return FusionFanout(index, nodes, kind, grid, pool_sizes)
    from ..langchain.fusion_fanout import FusionFanout as LangChainFanout
    from ..local.bm25 import BM25Index
    from ..local.langchain_stack import build_chroma_vectorstore

    store = build_chroma_vectorstore(entries, client=client, collection_name=name, warn_truncation=not whole_documents)
    return LangChainFanout(store, BM25Index([e.id for e in entries], [e.text for e in entries]), kind, grid, pool_sizes)
