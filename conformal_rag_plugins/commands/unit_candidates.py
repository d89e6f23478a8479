"""Every candidate setting ``evaluate`` compares: unit (chunk, parent, whole document) x fusion point x pool size.

The unit that is retrieved, the unit that counts as gold and the unit the LLM reads need
not be the same:

``chunk``
    Chunks are indexed, returned and gold (the chunks holding an answer).
``parent:max`` / ``parent:sum``
    Chunks are indexed; each parent document is scored from its chunks in the pool
    (:func:`~conformal_rag_plugins.retrieval.parent_pools.to_parent_pool`), parents are
    returned and gold.
``document``
    Whole documents are indexed (the embedding reads only their start; BM25 reads all)
    and returned.

Every candidate's observations carry the MiniLM token count of each unit, so tuning
can minimise what the LLM reads. One dense and one BM25 search per question and index
serve every fusion point and pool size (:func:`~.hosts.build_fanout`), and the questions
are embedded and searched in batches (``FusionFanout.many``).
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
    """Report key of one setting: ``[unit/]fusion[@pool]``; chunk level and the base pool are left out.

    So the keys of today's chunk-level settings are unchanged (``"zscore:0.5"``).

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
    """The units to compare.

    ``auto`` compares :data:`AUTO_UNITS` for a tuned hybrid over a corpus with split
    documents, else chunk level only (every unit is the same when nothing was split).

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

    Attributes
    ----------
    observations : dict of str to list of PoolObservation
        One list per :func:`candidate_key`, one observation per question (same order).
    settings : dict of str to dict
        Key -> ``{"unit", "fusion", "pool_size"}``.
    base_of : dict of str to str
        Larger-pool key -> the same setting at the base pool (see
        :func:`~conformal_rag_plugins.core.config_search.choose_configuration`).
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
    """The candidates :func:`collect_candidates` builds: every unit x fusion setting x pool size.

    Parameters
    ----------
    units : sequence of str
        Among ``chunk``, ``parent:max``, ``parent:sum`` and ``document`` (see :func:`resolve_units`).
    grid : sequence of FusionConfig, or ``[None]`` for a dense or BM25 host.
    pool_sizes : sequence of int
        The first is the base pool.

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

    Parameters
    ----------
    documents, questions : the corpus and the questions with document-level gold.
    chunked : ChunkedCorpus or None
        The chunks and the questions with chunk-level gold (``None``: nothing is chunked,
        and only ``chunk`` level over ``documents`` exists).
    space : CandidateSpace
        The units, fusion settings and pool sizes whose observations are built.
    client : chromadb client, optional
        Where to index (default: the cached persistent client).
    progress : bool, default True
        Show a progress bar over the questions.

    Examples
    --------
    >>> space = CandidateSpace(units=["chunk"], grid=[None], pool_sizes=[50])
    >>> candidates = collect_candidates("llamaindex", "dense", entries, questions, None, space=space)  # doctest: +SKIP
    """
    units, grid, pool_sizes = space.units, space.grid, space.pool_sizes
    import time

    from tqdm.auto import tqdm

    from ..local.tokens import count_tokens

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
        tqdm(each, desc="querying", unit="q", total=len(texts), disable=not progress)
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
