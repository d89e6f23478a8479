"""Every candidate ``evaluate`` compares: unit x fusion point x pool size.

Units: ``chunk`` (chunks indexed, returned and gold), ``parent:max``/``parent:sum`` (parents scored
from their pooled chunks, returned and gold) and ``document`` (whole documents indexed, of which
the embedding reads only the start). Observations carry each unit's MiniLM token count so tuning
can minimise what the LLM reads; one batched dense and BM25 search per question and index serves
every candidate (:func:`~.hosts.build_fanout`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ConformalError
from ..core.pools import PoolObservation
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..retrieval.parent_pools import to_parent_pool
from ..retrieval.pool_calibration import observe
from ..tuning.tuned_calibration import FusionConfig
from .chunk_corpus import ChunkedCorpus
from .hosts import build_fanout

#: Units ``--unit`` accepts besides ``auto``.
UNITS = ("chunk", "parent:max", "parent:sum", "document")
#: What ``--unit auto`` compares when some document was split.
AUTO_UNITS = ("chunk", "parent:max", "document")


def candidate_key(unit: str, config: FusionConfig | None, pool: int, base_pool: int, kind: str = "hybrid") -> str:
    """Report key ``[unit/]fusion[@pool]``; chunk level and the base pool are left out (old keys unchanged).

    Examples
    --------
    >>> candidate_key("chunk", FusionConfig("zscore", 0.5), 50, 50)
    'zscore:0.5'
    >>> candidate_key("document", FusionConfig("minmax", 0.3), 100, 50)
    'document/minmax:0.3@100'
    """
    name = config.key if config is not None else kind
    if unit != "chunk":
        name = f"{unit}/{name}"
    return name if pool == base_pool else f"{name}@{pool}"


def resolve_units(unit: str, *, tuned: bool, any_split: bool) -> list[str]:
    """The units to compare: ``auto`` is :data:`AUTO_UNITS` for a tuned hybrid with split documents, else chunks.

    Examples
    --------
    >>> resolve_units("auto", tuned=True, any_split=True)
    ['chunk', 'parent:max', 'document']
    >>> resolve_units("auto", tuned=True, any_split=False)
    ['chunk']
    """
    if unit == "auto":
        return list(AUTO_UNITS) if tuned and any_split else ["chunk"]
    if unit not in UNITS:
        raise ConformalError(f"unit must be 'auto' or one of {UNITS}, got {unit!r}.")
    return [unit]


@dataclass
class Candidates:
    """Aligned observations of every candidate setting, and how they relate.

    ``observations``: key -> one observation per question (same order); ``settings``: key ->
    ``{"unit", "fusion", "pool_size"}``; ``base_of``: larger-pool key -> same setting at the base pool.
    """

    observations: dict[str, list[PoolObservation]] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_of: dict[str, str] = field(default_factory=dict)
    seconds_index: float = 0.0
    seconds_queries: float = 0.0

    def key_of(self, unit: str, config: FusionConfig | None, pool: int) -> str:
        """The key of a setting (raises when it was not collected)."""
        for key, s in self.settings.items():
            if s["unit"] == unit and s["fusion"] == (config.key if config else None) and s["pool_size"] == pool:
                return key
        raise KeyError(f"No candidate for unit={unit}, fusion={config}, pool={pool}.")

    def miss_shares(self) -> dict[str, dict[str, float]]:
        """``{key of the base-pool setting: {pool size: share of questions with no gold in the pool}}``."""
        out: dict[str, dict[str, float]] = {}
        for key, obs in self.observations.items():
            name = self.base_of.get(key, key)
            share = sum(1 for o in obs if not o.gold_positions) / len(obs)
            out.setdefault(name, {})[str(self.settings[key]["pool_size"])] = share
        return out


def _pools_of_each(fetch: Any, questions: list[str]) -> Iterator[dict[Any, Any]]:
    """Every question's pools in order: one batched pass (``fetch.many``) when the fan-out has one."""
    if fetch is None:
        return iter([{}] * len(questions))
    many = getattr(fetch, "many", None)
    return iter(many(questions)) if callable(many) else map(fetch, questions)


@dataclass(frozen=True)
class CandidateSpace:
    """The units x fusion settings (``[None]`` for dense or BM25) x pool sizes (first is the base) to build.

    Examples
    --------
    >>> CandidateSpace(units=["chunk"], grid=[None], pool_sizes=[50]).pool_sizes
    [50]
    """

    units: Sequence[str]
    grid: Sequence[FusionConfig | None]
    pool_sizes: Sequence[int]


def collect_candidates(
    framework: str,
    kind: str,
    documents: Sequence[CorpusEntry],
    questions: Sequence[CalibrationExample],
    chunked: ChunkedCorpus | None,
    *,
    space: CandidateSpace,
    client: Any = None,
    progress: bool = True,
) -> Candidates:
    """Query every index once per question (in batches) and build every candidate's observations.

    ``chunked`` is ``None`` when nothing is chunked: only the ``chunk`` level over ``documents`` exists.
    """
    units, grid, pool_sizes = space.units, space.grid, space.pool_sizes
    import time

    from ..local.tokens import count_tokens
    from ..runtime.progress import progress_bar

    base_pool = int(pool_sizes[0])
    configs = [c for c in grid if c is not None]
    chunks: Sequence[CorpusEntry] = chunked.chunks if chunked is not None else documents
    chunk_questions = chunked.questions if chunked is not None else list(questions)
    parent_of = {c.id: (getattr(c, "parent_id", None) or c.id) for c in chunks}
    doc_text = {d.id: d.text for d in documents}
    chunk_level = [u for u in units if u != "document"]
    t0 = time.perf_counter()
    fetch_chunks = None
    if chunk_level:
        fetch_chunks = build_fanout(
            framework, kind, chunks, grid=configs, pool_sizes=pool_sizes, client=client, show_progress=progress
        )
    fetch_docs = (
        build_fanout(
            framework, kind, documents, grid=configs, pool_sizes=pool_sizes, client=client, whole_documents=True
        )
        if "document" in units
        else None
    )
    chunk_tokens = {c.id: float(count_tokens(c.text)) for c in chunks} if chunk_level else {}
    doc_tokens = {d.id: float(count_tokens(d.text)) for d in documents}
    out = Candidates(seconds_index=round(time.perf_counter() - t0, 2))
    t0 = time.perf_counter()
    for unit in units:
        for config in grid:
            for pool in pool_sizes:
                key = candidate_key(unit, config, pool, base_pool, kind)
                out.observations[key] = []
                out.settings[key] = {"unit": unit, "fusion": config.key if config else None, "pool_size": pool}
                if pool != base_pool:
                    out.base_of[key] = candidate_key(unit, config, base_pool, base_pool, kind)
    texts = [ex.question for ex in questions]
    each = zip(questions, _pools_of_each(fetch_chunks, texts), _pools_of_each(fetch_docs, texts), strict=True)
    for i, (ex, chunk_pools, doc_pools) in enumerate(
        progress_bar(each, desc="querying", unit="q", total=len(texts), enabled=progress)
    ):
        for unit in units:
            for config in grid:
                for pool in pool_sizes:
                    key = candidate_key(unit, config, pool, base_pool, kind)
                    if unit == "chunk":
                        obs = observe(chunk_questions[i], chunk_pools[(config, pool)], chunk_tokens)
                    elif unit == "document":
                        obs = observe(ex, doc_pools[(config, pool)], doc_tokens)
                    else:
                        how = unit.split(":", 1)[1]
                        parents = to_parent_pool(chunk_pools[(config, pool)], parent_of, doc_text, how=how)
                        obs = observe(ex, parents.pool, doc_tokens)
                    out.observations[key].append(obs)
    out.seconds_queries = round(time.perf_counter() - t0, 2)
    return out
