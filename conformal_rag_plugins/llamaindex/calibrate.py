"""Calibrate a LlamaIndex index or retriever."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever

from ..core.errors import ConformalError
from ..core.validation import check_pool_size
from ..datasets.examples import CalibrationExample
from ..labelling.chunk_labels import map_gold_to_chunks
from ..labelling.chunk_records import Chunk
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.corpus_filter import corpus_record
from ..retrieval.groups import GroupBy, chunk_group_labels, group_labels
from ..retrieval.pool_calibration import (
    calibrate_from_pools,
    check_gold_ids,
    collect_observations,
    label_counts,
)
from .fingerprint import fingerprint_of, pool_size_of
from .host import all_ids, document_chunks, existing_ids, pool_from_nodes
from .parent_retrieval import resolve_parent_level

__all__ = ["DEFAULT_POOL_SIZE", "calibrate_retriever", "gold_on_chunks", "resolve_host"]

DEFAULT_POOL_SIZE = 50


def resolve_host(host: Any, pool_size: int | None) -> tuple[BaseRetriever, int]:
    """Turn an index or retriever into (retriever, pool size), checking they agree."""
    if pool_size is not None:
        pool_size = check_pool_size(pool_size)
    if isinstance(host, BaseRetriever):
        own = pool_size_of(host)
        size = pool_size if pool_size is not None else own
        if size is None:
            raise ConformalError(f"Cannot tell how many candidates {type(host).__name__} returns; pass pool_size=...")
        if own is not None and own != size:
            raise ConformalError(
                f"The host retriever returns similarity_top_k={own} candidates but pool_size={size}; "
                "configure the host with the calibrated pool size."
            )
        return host, size
    if hasattr(host, "as_retriever"):
        size = DEFAULT_POOL_SIZE if pool_size is None else pool_size
        return host.as_retriever(similarity_top_k=size), size
    raise ConformalError(f"Expected a LlamaIndex index or BaseRetriever, got {type(host).__name__}.")


def gold_on_chunks(retriever: BaseRetriever, examples: list[CalibrationExample]) -> list[CalibrationExample]:
    """The examples with gold ids the store holds: document ids become the chunks that answer them.

    Gold ids the store does not hold as node ids are looked up as document ids (``ref_doc_id``)
    and mapped to that document's chunks by
    :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks`; ids that are
    neither raise :class:`~conformal_rag_plugins.core.CalibrationError` (when the store can tell).
    """
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = existing_ids(retriever, gold) if gold else None
    if known is None:
        return examples
    missing = [g for g in gold if g not in known]
    docs = document_chunks(retriever, missing) if missing else {}
    if docs:
        chunks = [Chunk(node_id, text, parent_id=doc) for doc, pairs in docs.items() for node_id, text in pairs]
        examples, _ = map_gold_to_chunks(examples, chunks)
        known = existing_ids(retriever, sorted({g for ex in examples for g in ex.gold_ids}))
    if known is not None:
        check_gold_ids(examples, known)
    return examples


def calibrate_retriever(
    host: Any,
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
    parent_aggregation: str = "max",
) -> RetrievalCalibration:
    """Calibrate the conformal retrieval threshold by querying the host itself.

    Parameters
    ----------
    host : VectorStoreIndex or BaseRetriever
        An index (queried with ``as_retriever(similarity_top_k=pool_size)``) or a
        retriever with scores, e.g. ``QueryFusionRetriever`` over vector + BM25.
    examples : sequence of CalibrationExample
        Gold chunks given as node ids or texts, or gold *documents* given by their ids
        (``Document.id_``, the nodes' ``ref_doc_id``, as after ``VectorStoreIndex.from_documents``):
        a split document's gold becomes its chunks that contain a reference answer (every chunk of
        it when none does, or the example has no ``answers``), as
        :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks` does; the rule of
        each example is counted in ``labels_["gold_rule"]``.
    confidence_level : float, default 0.9
    score : {"relative", "similarity", "rank", "auto"}
    pool_size : int, optional
        Candidates per query (default 50 for an index, the retriever's
        ``similarity_top_k`` otherwise). Gold outside the pool is a kept miss.
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
        Label-conditional thresholds: a metadata key of the chunks (``"collection"``,
        ``"source"``). Each calibration question counts in the group of its gold chunk (its own
        ``metadata[chunk_group_key]``, else the gold node's), each group gets its own threshold,
        and ``ConformalRetriever``/``ConformalNodePostprocessor`` keep a node iff it is within
        the threshold of its own group: ``P(gold kept | gold in group) >= confidence_level`` for
        every group, with no group needed at query time. Not with ``group_by``.
    control : {"coverage", "recall"}, default "coverage"
        ``recall``: every gold chunk of an example counts, and the threshold keeps
        ``E[1 - recall] <= 1 - confidence_level`` (conformal risk control, ``method="split"``
        or ``"crc"``) or that with probability ``1 - delta`` (Learn-then-Test, ``method="ltt"``
        or ``"pac"``). The ConformalRetriever uses the threshold unchanged.
    parents : docstore, StorageContext, mapping or list of nodes, optional
        Small-to-big: calibrate at the level of the chunks' parents (PARENT/SOURCE relationships,
        or an ``IndexNode``'s ``index_id``), read from this store. An ``AutoMergingRetriever`` host
        brings its storage context's docstore, a ``RecursiveRetriever`` its ``node_dict``. Gold ids
        may be parent, chunk or document ids.
    parent_aggregation : {"max", "sum"}, default "max"
        A parent's score from its chunks' scores (best chunk, or sum of min-max normalised scores).

    Examples
    --------
    >>> cal = calibrate_retriever(index, examples, confidence_level=0.9)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine(ConformalRetriever(index=index, calibration=cal))  # doctest: +SKIP
    """
    level = resolve_parent_level(host, parents, parent_aggregation)
    retriever, size = resolve_host(host if level is None else level.retriever, pool_size)
    examples = list(examples)
    if chunk_group_key is not None and group_by is not None:
        raise ConformalError("Give group_by (a group of the query) or chunk_group_key (of the chunk), not both.")
    groups = group_labels(examples, group_by) if group_by is not None else None
    seen: dict[str, Any] = {}  # chunk id -> metadata[chunk_group_key], from every pool fetched
    if level is not None:
        examples = level.lift_gold(examples, retriever)
        fetch = lambda q: level.parent_pool(retriever.retrieve(q))  # noqa: E731
    else:
        examples = gold_on_chunks(retriever, examples)
        fetch = lambda q: pool_from_nodes(retriever.retrieve(q))[0]  # noqa: E731
        if chunk_group_key is not None:
            fetch = lambda q: _recording(retriever.retrieve(q), chunk_group_key, seen)  # noqa: E731
    observations = collect_observations(examples, fetch, progress=progress)
    if chunk_group_key is not None:
        groups = chunk_group_labels(examples, chunk_group_key, seen)
    cal = calibrate_from_pools(
        observations,
        fingerprint=fingerprint_of(retriever) if level is None else level.fingerprint(retriever),
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
    return replace(cal, corpus_=corpus_record(all_ids(retriever)))


def _recording(nodes: list[Any], key: str, seen: dict[str, Any]) -> Any:
    """The candidate pool of ``nodes``, recording each node's ``metadata[key]`` in ``seen``."""
    for n in nodes:
        if n.node.metadata.get(key) is not None:
            seen[n.node.node_id] = n.node.metadata[key]
    return pool_from_nodes(nodes)[0]
