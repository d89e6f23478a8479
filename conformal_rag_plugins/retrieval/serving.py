"""The query-time decision of every drop-in, written once for both frameworks.

A drop-in (LlamaIndex ``ConformalRetriever`` / ``ConformalNodePostprocessor``, LangChain
``ConformalRetriever`` / ``ConformalDocumentCompressor``) turns one query's scored pool into
the calibrated set. Everything that does not depend on the framework is here:

* :class:`ServingOptions`, the knobs besides the calibration and the host (``min_k``,
  ``max_k``, the query's group, a drift monitor, the fingerprint checks), one frozen object
  passed whole;
* :func:`serve_set`: pick the threshold (the query's group, or each chunk's own group for a
  label-conditional calibration), keep the candidates within it with ``min_k``/``max_k``,
  warn when the guarantee is cut, feed the monitor, and say what to write on each kept
  candidate (:data:`CONFORMAL_METADATA_KEYS` and the group keys);
* :func:`serving_calibration` and :func:`expected_pool_size`, the calibration a drop-in
  serves and the pool it must receive.

The adapters only convert their nodes or documents to and from the best-first score list and
the metadata mappings, and copy :attr:`ServedSet.kept` onto them (the score under their own
key: LlamaIndex ``conformal_score``, LangChain ``score``).
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

    Passed whole as ``options=`` to both frameworks' ``ConformalRetriever``,
    ``ConformalNodePostprocessor`` and ``ConformalDocumentCompressor``. The defaults serve the
    plain conformal set with every check on.

    Attributes
    ----------
    min_k : int, optional
        Pad a smaller set with the next best candidates (a superset: keeps the guarantee).
    max_k : int, optional
        Cut a larger set to its best ``max_k`` candidates. This loses the guarantee for that
        query: the candidates say so (``conformal_guaranteed``) and a
        :class:`~conformal_rag_plugins.core.errors.GuaranteeCutWarning` is raised.
    group : str, optional
        With a per-group calibration (``calibrate_retriever(..., group_by=...)``): the group of
        every query (one drop-in per tenant).
    group_by : callable, optional
        Or a function of the query string giving its group (the one used at calibration;
        functions are not saved). A group too small or unknown at calibration gets the
        calibration's ``group_fallback_``; no group, the pooled threshold. The candidates say
        which in ``conformal_group`` and ``conformal_threshold_source``.
    monitor : ConformalMonitor, optional
        Updated with every query's statistic (drift alarm); it must belong to the calibration.
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
    >>> ServingOptions(min_k=5, max_k=2)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: max_k (2) must be >= min_k (5); lower min_k or raise max_k.
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
        """Refuse a group option the calibration cannot serve, or a monitor of another calibration.

        Examples
        --------
        >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
        >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, Fingerprint(
        ...     "none", "list", "cosine", "toy", 2, "cosine"))
        >>> ServingOptions().check(cal)
        >>> ServingOptions(group="acme").check(cal)
        Traceback (most recent call last):
        ...
        conformal_rag_plugins.core.errors.ConformalError: group= or group_by= needs a per-group calibration: ...
        """
        check_group_options(calibration, self.group, self.group_by)
        if self.monitor is not None:
            self.monitor.check_calibration(calibration)


#: The options of a drop-in built without ``options=``.
DEFAULT_OPTIONS = ServingOptions()


@dataclass(frozen=True)
class ServedSet:
    """One query's conformal set, framework-free: what the adapter copies onto its nodes or documents.

    Attributes
    ----------
    kept : tuple of (int, float, dict)
        For every returned candidate, best first: its position in the best-first pool, its
        score, and the metadata to add after the score (nonconformity, threshold, alpha,
        family, set size, guaranteed, and the group keys of a grouped calibration).
    hidden : tuple of str
        The keys to hide from the LLM and the embedding model (the conformal keys, and the
        group keys of a grouped calibration).
    decision : SetDecision
        The set before the metadata: its positions, the conformal size, whether it is guaranteed.
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
    """The calibrated set of one query's pool, with what to write on each kept candidate.

    ``scores`` are the pool's host scores best first (``checked=True`` when they are already
    known NaN-free and sorted); ``metadata`` the candidates' metadata, in the same order (read
    only for a per-chunk-group calibration: each candidate's ``metadata[chunk_group_key_]``
    picks its own threshold). With a per-group calibration the query's group
    (``options.group``, or ``options.group_by(query)``) picks the threshold, and a pooled
    fallback is marked not guaranteed. A set cut by ``max_k`` (or a ``+inf`` threshold) warns
    with :class:`~conformal_rag_plugins.core.errors.GuaranteeCutWarning` at ``stacklevel``
    (counted from the caller: 1 is the caller's line); ``options.monitor`` is updated with the
    scores and the group whose threshold was served.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> served = serve_set(cal, [0.9, 0.85, 0.5], [{}, {}, {}])
    >>> [(i, score, meta["conformal_set_size"]) for i, score, meta in served.kept]
    [(0, 0.9, 2), (1, 0.85, 2)]
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
        decided = decide_set(
            family, arr, threshold, min_k=options.min_k, max_k=options.max_k, validate=not checked
        )
        decision = mark_group_fallback(decided, group_meta)
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
    """What every drop-in class has besides its framework's base: ``options`` and an attachable ``monitor``.

    The class sets ``self.options`` (a :class:`ServingOptions`) and ``self.calibration``.
    ``drop_in.monitor = monitor`` attaches a drift monitor after the drop-in is built (its
    reference is usually computed with the drop-in's own ``pool_scores``); the monitor must
    belong to the calibration.

    Examples
    --------
    >>> class DropIn(ServingMixin):
    ...     options, calibration = ServingOptions(max_k=3), None
    >>> DropIn().monitor is None
    True
    """

    @property
    def monitor(self) -> Any:
        """The drift monitor updated with every query, or ``None`` (``options.monitor``)."""
        return self.options.monitor  # type: ignore[attr-defined]

    @monitor.setter
    def monitor(self, monitor: Any) -> None:
        if monitor is not None:
            monitor.check_calibration(self.calibration)  # type: ignore[attr-defined]
        self.options = replace(self.options, monitor=monitor)  # type: ignore[attr-defined]


def serving_calibration(calibration: Any) -> Any:
    """The retrieval calibration a drop-in serves: an end-to-end calibration's retrieval stage, else itself.

    Examples
    --------
    >>> serving_calibration("cal")
    'cal'
    """
    return calibration.retrieval_stage() if hasattr(calibration, "retrieval_stage") else calibration


def expected_pool_size(calibration: Any) -> int:
    """How many candidates a postprocessor or compressor must receive: the pool, or the whole collection if smaller.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> expected_pool_size(SimpleNamespace(pool_size_=50, corpus_={"size": 12})), expected_pool_size(
    ...     SimpleNamespace(pool_size_=50, corpus_=None))
    (12, 50)
    """
    size = (calibration.corpus_ or {}).get("size")
    pool = calibration.pool_size_
    return min(pool, int(size)) if size else pool


def refuse_loose_options(given: Mapping[str, Any], what: str) -> None:
    """Refuse a :class:`ServingOptions` field passed to a drop-in as its own keyword (``min_k=...``).

    A pydantic drop-in would otherwise ignore it silently.

    Examples
    --------
    >>> refuse_loose_options({"calibration": None}, "ConformalDocumentCompressor")
    >>> refuse_loose_options({"max_k": 3}, "ConformalDocumentCompressor")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: ConformalDocumentCompressor takes max_k= in its options: ...
    """
    loose = [f.name for f in fields(ServingOptions) if f.name in given]
    if loose:
        keywords = ", ".join(f"{name}=..." for name in loose)
        raise ConformalError(
            f"{what} takes {', '.join(n + '=' for n in loose)} in its options: pass "
            f"options=ServingOptions({keywords})."
        )


def ordered_by_score(
    items: Sequence[T], scores: Sequence[float | None], refuse: Callable[[], object] | str
) -> tuple[list[T], np.ndarray]:
    """``items`` best first (stable) and their scores; a missing/NaN score calls ``refuse()`` (the adapter's
    error) or raises :class:`ConformalError` with the message ``refuse``.

    Examples
    --------
    >>> ordered_by_score(["a", "b"], [0.5, 0.9], lambda: None)[0]
    ['b', 'a']
    """
    got = best_first(scores)
    if got is None:
        if isinstance(refuse, str):
            raise ConformalError(refuse)
        refuse()
        raise AssertionError("unreachable")
    ordered, order = got
    return (list(items) if order is None else [items[i] for i in order]), ordered


def check_pool_count(received: int, calibration: Any, unit: str, too_many: str, too_few: str) -> None:
    """Refuse a postprocessor's or compressor's pool larger than the calibrated one, or smaller than expected.

    ``too_many``/``too_few`` end the message (``str.format`` with ``n`` and ``pool``), after
    ``"Received {n} {unit} but the calibration used a pool of {pool}: "``.

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


def check_scored(ids: Sequence[Any], scores: Sequence[float | None], message: str) -> None:
    """Raise :class:`ConformalError` with ``message.format(id=..., score=...)`` at the first missing or NaN score.

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
