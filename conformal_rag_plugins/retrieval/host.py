"""What retrieval calibration needs from a host, whatever its framework: :class:`RetrievalHost`.

Each adapter's reader (``LlamaIndexHost``, ``LangChainHost``) implements it;
:func:`~.conformalizer.calibrate_on_host` is written once against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..core.errors import ConformalError
from ..core.pools import PoolObservation
from ..core.validation import check_pool_size
from ..datasets.examples import CalibrationExample
from .fingerprint import Fingerprint
from .groups import GroupBy, chunk_group_labels, group_labels
from .pool_calibration import CandidatePool, check_gold_ids, collect_observations, label_counts


@runtime_checkable
class RetrievalHost(Protocol):
    """A host as calibration sees it: a scored pool per question, its ids and its fingerprint.

    Attributes
    ----------
    pool_size : int
        Candidates per query (the host's own top-k, checked against the one asked for).

    Examples
    --------
    >>> import numpy as np
    >>> class ListHost:
    ...     pool_size = 2
    ...     def fetch(self, question, group_key=None):
    ...         return CandidatePool(("a", "b"), ("x", "y"), np.array([0.9, 0.1]))
    ...     def existing_ids(self, ids): return {"a", "b"} & set(ids)
    ...     def all_ids(self): return ["a", "b"]
    ...     def fingerprint(self): return Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    ...     def prepare_gold(self, examples): return check_gold_on_host(self, examples)
    >>> isinstance(ListHost(), RetrievalHost)
    True
    """

    pool_size: int

    def fetch(self, question: str, group_key: str | None = None) -> CandidatePool:
        """The host's pool for ``question``, best first, scores on its own scale (``groups`` from ``group_key``)."""
        ...

    def existing_ids(self, ids: Sequence[str]) -> set[str] | None:
        """Which of ``ids`` the store holds, or ``None`` when it cannot tell."""
        ...

    def all_ids(self) -> list[str] | None:
        """Every id the host can return (for the calibration's corpus record), or ``None``."""
        ...

    def fingerprint(self) -> Fingerprint:
        """What the threshold is valid for: store, embedding model, score scale, retriever."""
        ...

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        """The examples with gold on the host's unit (document ids to chunks, chunks to parents), checked."""
        ...


def check_gold_on_host(host: RetrievalHost, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
    """The examples, after checking their gold ids against the store when the host can (a typo is not a miss).

    A host that can list a document's chunks maps document ids instead (the adapters'
    ``prepare_gold``, through ``labelling.gold_ids.gold_on_chunks``).
    """
    examples = list(examples)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = host.existing_ids(gold) if gold else None
    if known is not None:
        check_gold_ids(examples, known)
    return examples


def agreed_pool_size(own: int | None, pool_size: int | None, *, unknown: str, mismatch: str) -> int:
    """``pool_size`` (>= 1), else the host's ``own``; both known must agree (errors: ``unknown``, ``mismatch``
    formatted with ``own`` and ``size``).

    >>> agreed_pool_size(50, None, unknown="?", mismatch="{own} != {size}")
    50
    """
    size = check_pool_size(pool_size) if pool_size is not None else own
    if size is None:
        raise ConformalError(unknown)
    if own is not None and own != size:
        raise ConformalError(mismatch.format(own=own, size=size))
    return size


@dataclass(frozen=True)
class HostObservations:
    """What calibration observes on a host: one pool observation per question, and what the calibration records.

    ``group_labels``: each question's group (``group_by``) or its gold chunks' group (``chunk_group_key``);
    ``labels``: :func:`~.pool_calibration.label_counts` of the examples; ``all_ids``: ``host.all_ids()``.
    """

    observations: list[PoolObservation]
    fingerprint: Fingerprint
    pool_size: int
    labels: dict[str, Any]
    group_labels: list[str] | None = None
    all_ids: list[str] | None = None


def observe_host(
    host: RetrievalHost,
    examples: Sequence[CalibrationExample],
    *,
    group_by: GroupBy | None = None,
    chunk_group_key: str | None = None,
    progress: bool = True,
) -> HostObservations:
    """Query ``host`` once per example (gold put on the host's unit first) and observe where the gold ranks.

    Raises
    ------
    ConformalError
        Both ``group_by`` and ``chunk_group_key``; a gold id the store does not hold.
    """
    if chunk_group_key is not None and group_by is not None:
        raise ConformalError("Give group_by (a group of the query) or chunk_group_key (of the chunk), not both.")
    examples = list(examples)
    groups = group_labels(examples, group_by) if group_by is not None else None
    examples = host.prepare_gold(examples)
    seen: dict[str, Any] = {}  # chunk id -> metadata[chunk_group_key], from every pool fetched

    def fetch(question: str) -> CandidatePool:
        pool = host.fetch(question, chunk_group_key)
        for ident, value in zip(pool.ids, pool.groups or (), strict=False):
            if ident is not None and value is not None:
                seen[ident] = value
        return pool

    observations = collect_observations(examples, fetch, progress=progress)
    if chunk_group_key is not None:
        groups = chunk_group_labels(examples, chunk_group_key, seen)
    return HostObservations(
        observations, host.fingerprint(), host.pool_size, label_counts(examples), groups, host.all_ids()
    )


@dataclass(frozen=True)
class Parents:
    """Small-to-big: where the chunks' parents are read from and how a parent is scored.

    Attributes
    ----------
    store : Any, optional
        The parents' store (LlamaIndex docstore, storage context, mapping or nodes; LangChain
        ``BaseStore`` or mapping). ``None``: the host's own (``AutoMergingRetriever``, ``MultiVectorRetriever``).
    aggregation : {"max", "sum"}, default "max"
        A parent's score from its chunks' scores.
    id_key : str, optional
        LangChain: the chunk metadata key of the parent id (default: the retriever's, else ``"doc_id"``).

    Examples
    --------
    >>> as_parents(Parents({"A": "text"}, aggregation="sum")).aggregation, as_parents({"A": "text"}).aggregation
    ('sum', 'max')
    >>> as_parents(None) is None
    True
    """

    store: Any = None
    aggregation: str = "max"
    id_key: str | None = None


def as_parents(parents: Any) -> Parents | None:
    """``parents=`` as a :class:`Parents`: a store becomes ``Parents(store)``; ``None`` stays ``None``."""
    if parents is None or isinstance(parents, Parents):
        return parents
    return Parents(parents)
