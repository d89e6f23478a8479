"""Calibrate a LangChain vector store or scored retriever."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.errors import ConformalError
from ..core.validation import check_pool_size
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.groups import GroupBy, chunk_group_labels, group_labels
from ..retrieval.pool_calibration import (
    calibrate_from_pools,
    check_gold_ids,
    collect_observations,
    label_counts,
)
from .fingerprint import fingerprint_of
from .host import Host, all_ids, existing_ids, fetch_pool
from .parent_retrieval import parent_examples, parent_host

__all__ = ["calibrate_retriever", "resolve_pool_size"]


def resolve_pool_size(host: Host, pool_size: int | None) -> int:
    """The pool size to query with: ``pool_size`` (>= 1), else the host's ``k``, else 50."""
    host_k = getattr(host, "k", None)
    if pool_size is not None:
        pool_size = check_pool_size(pool_size)
    if pool_size is None:
        return int(host_k) if isinstance(host_k, int) else 50
    if isinstance(host_k, int) and host_k < pool_size:
        raise ConformalError(f"The host retriever returns k={host_k} candidates, fewer than pool_size={pool_size}.")
    return pool_size


def calibrate_retriever(
    host: Host,
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float = 0.9,
    score: str = "relative",
    pool_size: int | None = None,
    method: str = "split",
    delta: float | None = None,
    random_state: int = 0,
    strict: bool = False,
    progress: bool = True,
    group_by: GroupBy | None = None,
    group_fallback: str = "keep_all",
    chunk_group_key: str | None = None,
    control: str = "coverage",
    parents: Any = None,
    id_key: str | None = None,
    parent_aggregation: str = "max",
) -> RetrievalCalibration:
    """Calibrate the conformal retrieval threshold on labelled examples.

    Parameters
    ----------
    host : VectorStore or BaseRetriever
        A vector store with relevance scores (e.g. ``langchain_chroma.Chroma``) or a
        retriever that puts its score in ``metadata['score']`` (e.g.
        :class:`ScoredFusionRetriever`). Its scores are used as they are.
    examples : sequence of CalibrationExample
        Questions with gold chunk ids (``Document.id``) or texts.
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set.
    score : {"relative", "similarity", "rank", "auto"}
    pool_size : int, optional
        Candidates per query (default: the host's ``k``, else 50). A gold chunk
        outside the pool is a miss, kept as +inf.
    method : {"split", "pac"}; delta : float, for PAC.
    group_by : str or callable, optional
        Per-group (Mondrian) thresholds: a key of ``CalibrationExample.metadata`` or a
        function of the question text (give the same function to ``ConformalRetriever``).
        Each group with enough questions gets its own threshold (coverage within the group);
        smaller groups keep every candidate (``SmallGroupWarning``, or an error with ``strict``).
    group_fallback : {"keep_all", "pooled"}, default "keep_all"
        What a group too small for its own threshold, or a group not seen at calibration,
        gets: every candidate (threshold ``+inf``), or the pooled threshold, which covers
        only over all groups together; its nodes/documents say ``conformal_guaranteed=False``.
    chunk_group_key : str, optional
        Label-conditional thresholds: a metadata key of the documents (``"collection"``,
        ``"source"``). Each calibration question counts in the group of its gold document (its
        own ``metadata[chunk_group_key]``, else the gold document's), each group gets its own
        threshold, and ``ConformalRetriever``/``ConformalCompressor`` keep a document iff it is
        within the threshold of its own group: ``P(gold kept | gold in group) >= confidence_level``
        for every group, with no group needed at query time. Not with ``group_by``.
    control : {"coverage", "recall"}, default "coverage"
        ``recall``: every gold chunk of an example counts, and the threshold keeps
        ``E[1 - recall] <= 1 - confidence_level`` (conformal risk control, ``method="split"``
        or ``"crc"``) or that with probability ``1 - delta`` (Learn-then-Test, ``method="ltt"``
        or ``"pac"``). The ConformalRetriever uses the threshold unchanged.
    parents : BaseStore or Mapping, optional
        Small-to-big: calibrate and return *parent* documents scored from their chunks. Parent id
        -> parent ``Document`` (e.g. ``InMemoryStore``). A ``MultiVectorRetriever`` /
        ``ParentDocumentRetriever`` host brings its own ``docstore`` and ``id_key``; its
        ``vectorstore`` scores the chunks. Gold ids may be parent ids or chunk ids.
    id_key : str, optional
        Chunk metadata key of the parent id (default: the retriever's ``id_key``, else ``"doc_id"``).
    parent_aggregation : {"max", "sum"}, default "max"
        A parent's score from its chunks in the pool (the best one, or the sum of min-max normalised scores).

    Returns
    -------
    RetrievalCalibration

    Examples
    --------
    >>> cal = calibrate_retriever(vectorstore, examples, confidence_level=0.9)  # doctest: +SKIP
    >>> retriever = ConformalRetriever(vectorstore=vectorstore, calibration=cal)  # doctest: +SKIP
    """
    source = parent_host(host, parents=parents, id_key=id_key, how=parent_aggregation)
    size = resolve_pool_size(host if source is None else source, pool_size)
    examples = list(examples) if source is None else parent_examples(source, examples)
    if chunk_group_key is not None and group_by is not None:
        raise ConformalError("Give group_by (a group of the query) or chunk_group_key (of the chunk), not both.")
    groups = group_labels(examples, group_by) if group_by is not None else None
    seen: dict[str, Any] = {}  # document id -> metadata[chunk_group_key], from every pool fetched
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = existing_ids(host, gold) if gold and source is None else None
    if known is not None:
        check_gold_ids(examples, known)
    fingerprint = fingerprint_of(host) if source is None else source.fingerprint()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Relevance scores must be between")
        fetch = (lambda q: fetch_pool(host, q, size)[0]) if source is None else (lambda q: source.fetch_pool(q, size))
        if chunk_group_key is not None and source is None:
            fetch = lambda q: _recording(fetch_pool(host, q, size), chunk_group_key, seen)  # noqa: E731
        observations = collect_observations(examples, fetch, progress=progress)
    if chunk_group_key is not None:
        groups = chunk_group_labels(examples, chunk_group_key, seen)
    cal = calibrate_from_pools(
        observations,
        fingerprint=fingerprint,
        pool_size=size,
        confidence_level=confidence_level,
        score=score,
        method=method,
        delta=delta,
        random_state=random_state,
        strict=strict,
        labels=label_counts(examples),
        group_labels=groups,
        group_by=group_by,
        control=control,
        group_fallback=group_fallback,
        chunk_group_key=chunk_group_key,
    )
    return replace(cal, corpus_=corpus_record(all_ids(host)))


def _recording(fetched: tuple[Any, list[Any]], key: str, seen: dict[str, Any]) -> Any:
    """The candidate pool of a fetch, recording each document's ``metadata[key]`` in ``seen``."""
    pool, docs = fetched
    for doc_id, doc in zip(pool.ids, docs, strict=True):
        if doc_id is not None and doc.metadata.get(key) is not None:
            seen[doc_id] = doc.metadata[key]
    return pool
