"""Build a host retriever (dense, BM25 or hybrid) for either framework on the local stack."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..calibration.driver import CandidatePool
from ..calibration.examples import CorpusEntry
from ..core.fusion import DEFAULT_DENSE_WEIGHT

__all__ = ["FRAMEWORKS", "RETRIEVERS", "HostBundle", "build_host", "corpus_key"]

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


def corpus_key(entries: Sequence[CorpusEntry]) -> str:
    """Short content hash naming the collection of a corpus."""
    h = hashlib.sha1()
    for e in entries:
        h.update(e.id.encode())
        h.update(b"\0")
        h.update(e.text.encode())
    return h.hexdigest()[:12]


def build_host(
    framework: str,
    kind: str,
    entries: Sequence[CorpusEntry],
    *,
    pool_size: int = 50,
    client: Any = None,
    dense_weight: float = DEFAULT_DENSE_WEIGHT,
    show_progress: bool = False,
) -> HostBundle:
    """Index ``entries`` in Chroma (embeddings cached) and wrap the chosen retriever."""
    if framework not in FRAMEWORKS or kind not in RETRIEVERS:
        raise ValueError(f"framework must be one of {FRAMEWORKS} and retriever one of {RETRIEVERS}.")
    name = f"crp-{framework}-{corpus_key(entries)}"
    if framework == "llamaindex":
        from ..llamaindex.host import pool_from_nodes
        from ..llamaindex.stack import build_chroma_index, build_hybrid_retriever

        index, nodes = build_chroma_index(entries, client=client, collection_name=name, show_progress=show_progress)
        if kind == "dense":
            host: Any = index.as_retriever(similarity_top_k=pool_size)
        elif kind == "bm25":
            from llama_index.retrievers.bm25 import BM25Retriever

            host = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=pool_size)
        else:
            host = build_hybrid_retriever(index, nodes, pool_size=pool_size, dense_weight=dense_weight)
        return HostBundle(framework, kind, host, pool_size, lambda q: pool_from_nodes(host.retrieve(q))[0])

    from ..langchain.host import fetch_pool
    from ..langchain.stack import build_chroma_vectorstore
    from ..langchain.stack import build_hybrid_retriever as lc_hybrid

    store = build_chroma_vectorstore(entries, client=client, collection_name=name)
    if kind == "dense":
        host = store
    else:
        weight = 0.0 if kind == "bm25" else dense_weight
        host = lc_hybrid(store, entries, pool_size=pool_size, dense_weight=weight)
    return HostBundle(framework, kind, host, pool_size, lambda q: fetch_pool(host, q, pool_size)[0])
