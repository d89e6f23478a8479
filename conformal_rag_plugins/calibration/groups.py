"""Per-group (Mondrian) thresholds of a :class:`RetrievalCalibration`: labels, recomputation, query-time choice.

A grouped calibration stores the group of every calibration score (``group_labels_``,
aligned with ``scores_``) and the threshold of every group (``groups_``). Loading a file
recomputes every group threshold from the stored scores and labels and refuses a file whose
stored ones disagree. At query time :func:`threshold_for` picks the group's threshold. A group
too small for its own rank, or one the calibration never saw, gets the calibration's
``group_fallback_``: by default ``+inf`` (keep every candidate, valid within any group), or
with ``"pooled"`` the pooled threshold, whose sets :func:`mark_group_fallback` marks not guaranteed
(it holds over all groups together, not within the query's). A query without a group gets the
pooled threshold and its ordinary marginal guarantee. The source says which.

Examples
--------
>>> from conformal_rag_plugins.calibration import Fingerprint, RetrievalCalibration
>>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
>>> scores = tuple(i / 20 for i in range(20)) + (0.5, 0.6)
>>> labels = ("a",) * 20 + ("b",) * 2
>>> cal = with_groups(RetrievalCalibration(0.9, 0.1, "split", "relative", 5, 22, 0, scores, fp), labels, "tenant")
>>> threshold_for(cal, "a"), threshold_for(cal, "b"), threshold_for(cal, "zzz")
((0.9, 'group'), (inf, 'keep-all-small-group'), (inf, 'keep-all-unknown-group'))
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..core.errors import CalibrationIntegrityError, ConformalError, InfiniteThresholdWarning, SmallGroupWarning
from ..core.mondrian import check_fallback, check_group_label, group_thresholds
from ..core.selection import SetDecision
from .examples import CalibrationExample

__all__ = [
    "GROUP_METADATA_KEYS",
    "GroupBy",
    "check_group_options",
    "check_groups",
    "describe_group_by",
    "group_labels",
    "groups_payload",
    "mark_group_fallback",
    "query_group",
    "query_threshold",
    "recomputed_groups",
    "threshold_for",
    "with_groups",
]

#: A metadata key of the calibration examples, or a function of the question text.
GroupBy = str | Callable[[str], Any]

C = TypeVar("C")


def describe_group_by(group_by: GroupBy) -> str:
    """How a calibration records its grouping: the metadata key, or ``callable:<qualified name>``.

    Examples
    --------
    >>> describe_group_by("tenant"), describe_group_by(len)
    ('tenant', 'callable:len')
    """
    if isinstance(group_by, str):
        if not group_by.strip():
            raise ConformalError("group_by must be a non-empty metadata key or a function of the question.")
        return group_by
    if callable(group_by):
        name = getattr(group_by, "__qualname__", None) or type(group_by).__qualname__
        return f"callable:{name}"
    raise ConformalError(f"group_by must be a metadata key (str) or a function of the question, got {group_by!r}.")


def _label_of(group_by: GroupBy, example: CalibrationExample) -> str:
    where = f" for question {example.question!r}"
    if isinstance(group_by, str):
        if group_by not in example.metadata:
            raise ConformalError(
                f"The calibration question {example.question!r} has no metadata key {group_by!r} to group by; "
                "give every example that key (qa JSONL fields other than the known ones land in metadata)."
            )
        return check_group_label(example.metadata[group_by], where)
    try:
        label = group_by(example.question)
    except Exception as exc:  # a user's function: name the question and keep the cause
        raise ConformalError(f"group_by raised {type(exc).__name__}: {exc}{where}.") from exc
    return check_group_label(label, where)


def group_labels(examples: Sequence[CalibrationExample], group_by: GroupBy) -> tuple[str, ...]:
    """The group of every example: ``example.metadata[group_by]`` or ``group_by(example.question)``.

    Raises
    ------
    ConformalError
        A missing key, a function that raises, or a label that is empty or not a string/int,
        naming the question.

    Examples
    --------
    >>> group_labels([CalibrationExample("Who?", gold_ids=("a",), metadata={"t": "x"})], "t")
    ('x',)
    """
    describe_group_by(group_by)
    return tuple(_label_of(group_by, ex) for ex in examples)


def recomputed_groups(cal: Any, *, strict: bool = False, warn: bool = False) -> dict[str, dict[str, Any]]:
    """Every group's ``{"n", "threshold", "source"}`` from ``cal.scores_`` and ``cal.group_labels_``."""
    if not cal.group_labels_:
        return {}
    with warnings.catch_warnings():
        if not warn:
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
        pooled = cal.recomputed_threshold()
    out = group_thresholds(
        cal.scores_,
        cal.group_labels_,
        cal.alpha_,
        pooled=pooled,
        method=cal.method_,
        delta=cal.delta_,
        strict=strict,
        warn=warn,
        fallback=cal.group_fallback_,
    )
    return {g: v.to_dict() for g, v in out.items()}


def with_groups(
    cal: C, labels: Sequence[str], group_by: GroupBy, *, strict: bool = False, fallback: str = "keep_all"
) -> C:
    """A copy of ``cal`` with per-group thresholds for ``labels`` (aligned with its scores).

    A too-small group warns :class:`SmallGroupWarning` and keeps every candidate
    (``fallback="keep_all"``) or uses the pooled threshold (``fallback="pooled"``, marked not
    guaranteed at query time), or raises
    :class:`~conformal_rag_plugins.core.errors.CalibrationError` with ``strict``. ``fallback``
    also decides what a group not seen at calibration gets.
    """
    fallback = check_fallback(fallback)
    labels = tuple(check_group_label(g, f" (calibration question {i})") for i, g in enumerate(labels))
    if len(labels) != len(cal.scores_):  # type: ignore[attr-defined]
        raise ConformalError(f"{len(labels)} group labels for {len(cal.scores_)} calibration scores.")  # type: ignore[attr-defined]
    staged = replace(cal, group_labels_=labels, group_by_=describe_group_by(group_by), group_fallback_=fallback)  # type: ignore[type-var]
    with warnings.catch_warnings():
        warnings.simplefilter("always", SmallGroupWarning)
        groups = recomputed_groups(staged, strict=strict, warn=True)
    return replace(staged, groups_=groups)  # type: ignore[type-var]


def check_groups(cal: Any) -> None:
    """Raise :class:`CalibrationIntegrityError` unless ``groups_`` is what the scores and labels give."""
    if not cal.group_labels_ and not cal.groups_:
        return
    if len(cal.group_labels_) != len(cal.scores_):
        raise CalibrationIntegrityError(
            f"The calibration records {len(cal.group_labels_)} group labels for {len(cal.scores_)} scores."
        )
    again = recomputed_groups(cal)
    if set(again) != set(cal.groups_):
        raise CalibrationIntegrityError(
            f"The stored groups {sorted(cal.groups_)} are not the groups of the stored labels {sorted(again)}."
        )
    for g, want in again.items():
        got = cal.groups_[g]
        stored, redo = float(got["threshold"]), float(want["threshold"])
        same = stored == redo or (
            math.isfinite(stored) and math.isfinite(redo) and math.isclose(stored, redo, rel_tol=1e-12)
        )
        if not same or int(got["n"]) != want["n"] or got["source"] != want["source"]:
            raise CalibrationIntegrityError(
                f"The stored threshold of group {g!r} ({got}) disagrees with {want} recomputed from its "
                f"{want['n']} stored scores: the file was edited or corrupted. Re-run calibration."
            )


def groups_payload(cal: Any, encode: Callable[[float], Any]) -> dict[str, Any]:
    """The JSON fields of a grouped calibration (nothing for an ungrouped one, so old readers see old files)."""
    if not cal.group_labels_:
        return {}
    return {
        "group_by": cal.group_by_,
        "groups": {g: {**v, "threshold": encode(v["threshold"])} for g, v in cal.groups_.items()},
        "group_labels": list(cal.group_labels_),
        "group_fallback": cal.group_fallback_,
    }


def threshold_for(cal: Any, group: str | None) -> tuple[float, str]:
    """``(threshold, source)`` for a query of ``group``; source is one of ``GROUP_SOURCES``.

    A group the calibration saw gets its stored threshold (its own, or the fallback of a
    too-small group). A group it never saw gets the calibration's ``group_fallback_``:
    ``+inf`` (``"keep-all-unknown-group"``) or the pooled threshold
    (``"pooled-unknown-group"``). ``None`` (no group) gets the pooled threshold
    (``"pooled-no-group"``), which holds marginally over the calibration's population.
    """
    if group is None:
        return float(cal.threshold_), "pooled-no-group"
    entry = cal.groups_.get(str(group))
    if entry is not None:
        return float(entry["threshold"]), str(entry["source"])
    if getattr(cal, "group_fallback_", "keep_all") == "pooled":
        return float(cal.threshold_), "pooled-unknown-group"
    return math.inf, "keep-all-unknown-group"


def mark_group_fallback(decision: SetDecision, group_meta: Mapping[str, Any]) -> SetDecision:
    """``decision`` marked not guaranteed when its threshold was the pooled fallback of a group.

    The pooled threshold used for a group (``fallback="pooled"``) holds only over all groups
    together: a hard group can sit far below the target. Any other source is returned as it
    is (a ``+inf`` keep-all threshold is valid within any group, and ``decide_set`` already
    says that the pool covers only when the gold chunk is in it).

    Examples
    --------
    >>> d = SetDecision((0, 1), 2, True, "")
    >>> mark_group_fallback(d, {"conformal_threshold_source": "group"}) is d
    True
    >>> marked = mark_group_fallback(d, {"conformal_threshold_source": "pooled-small-group"})
    >>> marked.guaranteed, marked.reason[:40]
    (False, 'The pooled threshold was used for a grou')
    """
    source = group_meta.get("conformal_threshold_source")
    if source not in ("pooled-small-group", "pooled-unknown-group"):
        return decision
    why = "too small for a threshold of its own" if source == "pooled-small-group" else "not seen at calibration"
    caveat = (
        f"The pooled threshold was used for a group {why} (group_fallback='pooled'): it covers only "
        "marginally over all groups, not within this one, so the set is not guaranteed for this query."
    )
    return replace(decision, guaranteed=False, reason=" ".join(filter(None, (caveat, decision.reason))))


def query_group(group: Any, group_by: Callable[[str], Any] | None, query: str) -> str | None:
    """The group of one query: the explicit ``group``, else ``group_by(query)``, else ``None``.

    Raises
    ------
    ConformalError
        ``group_by`` raised or returned an empty or non-string label (naming the query).

    Examples
    --------
    >>> query_group(None, lambda q: q.split(":")[0], "acme: who?"), query_group("x", None, "q")
    ('acme', 'x')
    """
    where = f" for the query {query!r}"
    if group is not None:
        return check_group_label(group, where)
    if group_by is None:
        return None
    try:
        label = group_by(query)
    except Exception as exc:
        raise ConformalError(f"group_by raised {type(exc).__name__}: {exc}{where}.") from exc
    return check_group_label(label, where)


#: The metadata keys a grouped retriever adds to every returned node/document.
GROUP_METADATA_KEYS = ("conformal_group", "conformal_threshold_source")


def check_group_options(cal: Any, group: Any, group_by: Any) -> None:
    """Refuse ``group``/``group_by`` for a calibration without per-group thresholds, or a bad ``group``/``group_by``."""
    if group is None and group_by is None:
        return
    if not getattr(cal, "groups_", None):
        raise ConformalError("group= or group_by= needs a per-group calibration: calibrate with group_by=... first.")
    if group is not None:
        check_group_label(group, " (group=)")
    if group_by is not None and not callable(group_by):
        raise ConformalError(
            f"The retriever's group_by must be a function of the query string, got {group_by!r} (the calibration "
            f"grouped by {cal.group_by_!r}; a metadata key is not known at query time: pass group=... instead)."
        )


def query_threshold(
    cal: Any, group: Any, group_by: Callable[[str], Any] | None, query: str
) -> tuple[float, dict[str, Any]]:
    """The threshold of one query and the metadata saying which (empty for an ungrouped calibration).

    Examples
    --------
    >>> from conformal_rag_plugins.calibration import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.9, 0.1, "split", "relative", 5, 9, 0, tuple(i / 10 for i in range(1, 10)), fp)
    >>> query_threshold(cal, None, None, "who?")
    (0.9, {})
    """
    if not getattr(cal, "groups_", None) and group is None and group_by is None:
        return float(cal.threshold_), {}
    label = query_group(group, group_by, query)
    threshold, source = threshold_for(cal, label)
    return threshold, {"conformal_group": label, "conformal_threshold_source": source}
