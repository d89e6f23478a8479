"""Build a host retriever (dense, BM25 or hybrid) for either framework on the local stack."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.fusion import DEFAULT_DENSE_WEIGHT
from ..datasets.examples import CorpusEntry
from ..frameworks import FrameworkAdapter, IndexRequest, collection_name
from ..frameworks import corpus_key as corpus_key  # the commands and benchmarks name collections with it
from ..retrieval.pool_calibration import CandidatePool
from ..tuning.fusion_config import DEFAULT_FUSION_GRID
from ..tuning.tuned_calibration import FusionConfig
from .framework_registry import FRAMEWORKS, get_framework

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


def _adapter(framework: str, kind: str) -> FrameworkAdapter:
    """The registered adapter of ``framework``, once ``framework`` and the retriever ``kind`` are known ones."""
    if framework not in FRAMEWORKS or kind not in RETRIEVERS:
        raise ValueError(f"framework must be one of {FRAMEWORKS} and retriever one of {RETRIEVERS}.")
    return get_framework(framework)


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
    """Index ``entries`` once and build one host per fusion configuration (``{None: bundle}`` if not hybrid)."""
    request = IndexRequest(
        kind,
        entries,
        grid=grid,
        pool_sizes=(pool_size,),
        client=client,
        collection_name=collection_name(framework, entries),
        show_progress=show_progress,
    )
    hosts = _adapter(framework, kind).build_hosts(request)
    return {c: HostBundle(framework, kind, host, pool_size, fetch, c) for c, (host, fetch) in hosts.items()}


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
    """Index ``entries`` in Chroma (embeddings cached) and wrap the retriever (hybrid: ``fusion``, default z-score)."""
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
    """Index ``entries`` once; return ``fetch(question) -> {(fusion or None, pool size): pool}``.

    One dense and one BM25 search per question serve every setting. ``whole_documents`` (the
    ``document`` unit's index, embedded past the window on purpose) silences the truncation warning.
    """
    request = IndexRequest(
        kind,
        entries,
        grid=grid,
        pool_sizes=pool_sizes,
        client=client,
        collection_name=collection_name(framework, entries),
        show_progress=show_progress,
        whole_documents=whole_documents,
    )
    return _adapter(framework, kind).build_fanout(request)
