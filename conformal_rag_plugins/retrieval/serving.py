"""The framework-free query-time decision of every drop-in (both frameworks' retrievers,
postprocessor and compressor): :class:`ServingOptions`, :func:`serve_set` and the pool checks.

The adapters only convert their nodes or documents to and from best-first scores and metadata,
and copy :attr:`ServedSet.kept` onto them (score key: LlamaIndex ``conformal_score``, LangChain ``score``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np

from ..core.errors import ConformalError, GuaranteeCutWarning
from ..core.selection import SetDecision, best_first, check_k_bounds, conformal_metadata, decide_set
from .group_check import check_group_by, mark_unchecked_group_by, unchecked_group_by
from .groups import GROUP_METADATA_KEYS, check_group_options, chunk_set, mark_group_fallback, query_threshold

#: The metadata keys every returned candidate gets (hidden from the LLM in LlamaIndex).
CONFORMAL_METADATA_KEYS = (
    "conformal_score",
    "conformal_nonconformity",
    "conformal_threshold",
    "conformal_alpha",
    "conformal_score_family",
    "conformal_set_size",
    "conformal_guaranteed",
)

#: Metadata key of a returned parent (small-to-big) listing the chunks that scored it, best first.
CHUNKS_METADATA_KEY = "conformal_chunks"

T = TypeVar("T")


@dataclass(frozen=True)
class ServingOptions:
    """How a drop-in serves the calibrated set: every knob besides the calibration and the host.

    Passed whole as ``options=`` to every drop-in (both frameworks' ``ConformalRetriever``,
    ``ConformalNodePostprocessor``, ``ConformalDocumentCompressor``). The defaults serve the plain
    conformal set with every check on.

    Attributes
    ----------
    min_k : int, optional
        Pad a smaller set with the next best candidates (a superset: keeps the guarantee).
    max_k : int, optional
        Cut a larger set to its best ``max_k``. This loses the guarantee for that query: the
        candidates say so (``conformal_guaranteed``) and a
        :class:`~conformal_rag_plugins.core.errors.GuaranteeCutWarning` is raised.
    group : str, optional
        The group of every query, for a per-group calibration (``calibrate_retriever(..., group_by=...)``).
    group_by : callable, optional
        Or a function of the query string giving its group (the calibration's; functions are not
        saved). A group too small or unknown at calibration gets ``group_fallback_``; no group, the
        pooled threshold. ``conformal_group`` and ``conformal_threshold_source`` say which. It is
        rerun on the calibration questions a function-grouped calibration records, and refused if
        it gives one of them another group; without recorded questions its sets are not guaranteed.
    monitor : ConformalMonitor, optional
        Updated with every query's statistic; it must belong to the calibration.
    check_fingerprint : bool, default True
        ``False`` skips the fingerprint and collection checks of the host and of every query's
        pool (the pool-size checks stay).

    Raises
    ------
    ConformalError
        A negative ``min_k``, a ``max_k`` below 1, or ``max_k < min_k``.

    Examples
    --------
    >>> ServingOptions(min_k=2, max_k=5).max_k
    5
    """

    min_k: int | None = None
    max_k: int | None = None
    group: str | None = None
    group_by: Callable[[str], Any] | None = None
    monitor: Any = None
    check_fingerprint: bool = True

    def __post_init__(self) -> None:
        check_k_bounds(self.min_k, self.max_k)

    def check(self, calibration: Any) -> None:
        """Refuse a group option the calibration cannot serve, or a monitor of another calibration."""
        check_group_options(calibration, self.group, self.group_by)
        check_group_by(calibration, self.group_by)
        if self.monitor is not None:
            check_fed_monitor(self.monitor, calibration)

    def for_call(self, *caps: int | None, group: str | None = None) -> ServingOptions:
        """One call's options: ``max_k`` the smallest of ``caps`` and ``max_k``, ``group`` when given.

        >>> ServingOptions(max_k=5).for_call(None, 3).max_k, ServingOptions().for_call(None).max_k
        (3, None)
        """
        known = [c for c in (*caps, self.max_k) if c is not None]
        cap = min(known) if known else None
        if cap == self.max_k and (group is None or group == self.group):
            return self
        return replace(self, max_k=cap, group=self.group if group is None else group)


#: The options of a drop-in built without ``options=``.
DEFAULT_OPTIONS = ServingOptions()


@dataclass(frozen=True)
class ServedSet:
    """One query's set, framework-free: ``kept`` ``(pool position, score, metadata to add)`` best first,
    the ``hidden`` keys (conformal and group) and the :class:`SetDecision` before the metadata.
    """

    kept: tuple[tuple[int, float, dict[str, Any]], ...]
    hidden: tuple[str, ...]
    decision: SetDecision


def serve_set(
    calibration: Any,
    scores: Sequence[float] | np.ndarray,
    metadata: Sequence[Mapping[str, Any]],
    options: ServingOptions | None = None,
    *,
    query: str = "",
    checked: bool = False,
    stacklevel: int = 2,
) -> ServedSet:
    """The calibrated set of one query's best-first pool, with what to write on each kept candidate.

    ``checked=True``: ``scores`` already NaN-free and sorted. A per-chunk-group calibration reads each
    candidate's threshold from ``metadata[chunk_group_key_]``; else the query's group (``options.group``
    or ``options.group_by(query)``) picks it, a pooled fallback being marked not guaranteed. A set cut
    by ``max_k`` or a ``+inf`` threshold warns :class:`~conformal_rag_plugins.core.errors.GuaranteeCutWarning`
    at ``stacklevel`` (1: the caller's line); ``options.monitor`` observes the served group's statistic.
    """
    options = options or DEFAULT_OPTIONS
    arr = np.asarray(scores, dtype=float)
    family = calibration.score_family_
    per_chunk: list[dict[str, Any]] | None = None
    thresholds = None
    if getattr(calibration, "chunk_group_key_", None):
        key = calibration.chunk_group_key_
        decision, thresholds, per_chunk = chunk_set(
            calibration,
            arr,
            [m.get(key) for m in metadata],
            min_k=options.min_k,
            max_k=options.max_k,
            validate=not checked,
        )
        threshold, group_meta = calibration.threshold_, dict.fromkeys(GROUP_METADATA_KEYS)  # the keys to hide
    else:
        threshold, group_meta = query_threshold(calibration, options.group, options.group_by, query)
        decided = decide_set(family, arr, threshold, min_k=options.min_k, max_k=options.max_k, validate=not checked)
        decision = mark_group_fallback(decided, group_meta)
        if options.group is None:
            decision = mark_unchecked_group_by(decision, unchecked_group_by(calibration, options.group_by))
    if math.isinf(threshold) and group_meta.get("conformal_group") is None:  # the pooled threshold: say why
        why = getattr(calibration, "infinite_reason_", "")
        if why and why not in decision.reason:
            decision = replace(decision, reason=" ".join(filter(None, (decision.reason, why))))
    stale = getattr(calibration, "stale_rule_reason_", "")
    if stale and decision.guaranteed:
        decision = replace(decision, guaranteed=False, reason=stale)
    if not decision.guaranteed:
        warnings.warn(decision.reason, GuaranteeCutWarning, stacklevel=stacklevel + 1)
    if options.monitor is not None:
        # the group whose threshold was served: the monitor's reference used the same rule
        options.monitor.observe(
            arr, set_size=decision.conformal_size, calibration=calibration, group=group_meta.get("conformal_group")
        )
    shared = conformal_metadata(
        family, threshold, calibration.alpha_, arr, decision, None if thresholds is None else np.array(thresholds)
    )
    if per_chunk is None:
        kept = tuple((i, score, meta | group_meta) for i, score, meta in shared)
    else:
        kept = tuple((i, score, meta | per_chunk[i]) for i, score, meta in shared)
    return ServedSet(kept, (*CONFORMAL_METADATA_KEYS, *group_meta), decision)


class ServingMixin:
    """``options`` and an attachable ``monitor`` for every drop-in (which sets ``options`` and ``calibration``);
    ``drop_in.monitor = m`` attaches a drift monitor later, checked against the calibration.
    """

    @property
    def monitor(self) -> Any:
        """The drift monitor updated with every query (``options.monitor``), or ``None``."""
        return self.options.monitor  # type: ignore[attr-defined]

    @monitor.setter
    def monitor(self, monitor: Any) -> None:
        if monitor is not None:
            check_fed_monitor(monitor, self.calibration)  # type: ignore[attr-defined]
        self.options = replace(self.options, monitor=monitor)  # type: ignore[attr-defined]


def check_fed_monitor(monitor: Any, calibration: Any) -> None:
    """Refuse a monitor of another calibration, or one that watches other scores than the served ones."""
    monitor.check_calibration(calibration)
    if getattr(monitor, "score_source", "served") != "served":
        raise ConformalError(monitor.not_served_message())


def serving_calibration(calibration: Any) -> Any:
    """The retrieval calibration a drop-in serves: an end-to-end calibration's retrieval stage, else itself."""
    return calibration.retrieval_stage() if hasattr(calibration, "retrieval_stage") else calibration


def expected_pool_size(calibration: Any) -> int:
    """How many candidates a postprocessor or compressor must receive: the pool, or the whole collection if smaller.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> expected_pool_size(SimpleNamespace(pool_size_=50, corpus_={"size": 12}))
    12
    """
    size = (calibration.corpus_ or {}).get("size")
    pool = calibration.pool_size_
    return min(pool, int(size)) if size else pool


def refuse_loose_options(given: Mapping[str, Any], what: str) -> None:
    """Refuse a :class:`ServingOptions` field passed as a drop-in's own keyword (pydantic would ignore it)."""
    loose = [f.name for f in fields(ServingOptions) if f.name in given]
    if loose:
        keywords = ", ".join(f"{name}=..." for name in loose)
        raise ConformalError(
            f"{what} takes {', '.join(n + '=' for n in loose)} in its options: pass options=ServingOptions({keywords})."
        )


def ordered_by_score(
    items: Sequence[T], scores: Sequence[float | None], refuse: Callable[[], object] | str
) -> tuple[list[T], np.ndarray]:
    """``items`` best first (stable) and their scores; a missing/NaN score calls ``refuse()`` or raises its message."""
    got = best_first(scores)
    if got is None:
        if isinstance(refuse, str):
            raise ConformalError(refuse)
        refuse()
        raise AssertionError("unreachable")
    ordered, order = got
    return (list(items) if order is None else [items[i] for i in order]), ordered


def check_pool_count(received: int, calibration: Any, unit: str, too_many: str, too_few: str) -> None:
    """Refuse a pool larger than the calibrated one, or smaller than :func:`expected_pool_size`.

    ``too_many``/``too_few`` end the message (``str.format`` with ``n`` and ``pool``).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> check_pool_count(3, SimpleNamespace(pool_size_=2, corpus_=None), "nodes", "use k={pool}.", "")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: Received 3 nodes but the calibration used a pool of 2: use k=2.
    """
    pool = calibration.pool_size_
    end = too_many if received > pool else too_few if received < expected_pool_size(calibration) else None
    if end is not None:
        start = f"Received {received} {unit} but the calibration used a pool of {pool}: "
        raise ConformalError(start + end.format(n=received, pool=pool))


def check_host_k(host: Any, calibration: Any) -> None:
    """Refuse a host retriever whose own ``k`` (when it has one) is smaller than the calibrated pool.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> check_host_k(SimpleNamespace(k=50), SimpleNamespace(pool_size_=50))
    >>> check_host_k(SimpleNamespace(k=4), SimpleNamespace(pool_size_=50))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: The host retriever returns k=4 candidates but ...
    """
    host_k = getattr(host, "k", None)
    if isinstance(host_k, int) and host_k < calibration.pool_size_:
        raise ConformalError(
            f"The host retriever returns k={host_k} candidates but the calibration used a pool of "
            f"{calibration.pool_size_}; query with the same pool."
        )


def check_scored(ids: Sequence[Any], scores: Sequence[float | None], message: str) -> None:
    """Raise ``ConformalError(message.format(id=..., score=...))`` at the first missing or NaN score.

    Examples
    --------
    >>> check_scored(["a", "b"], [0.5, None], "{id!r} has no score ({score!r})")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: 'b' has no score (None)
    """
    for i, score in zip(ids, scores, strict=True):
        if score is None or (isinstance(score, float) and math.isnan(score)):
            raise ConformalError(message.format(id=i, score=score))
