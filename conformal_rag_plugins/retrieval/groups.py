"""Per-group (Mondrian) thresholds of a :class:`RetrievalCalibration`: labels, recomputation, query-time choice.

Loading a file recomputes every group threshold and refuses one that disagrees. A group too small
for its rank, or never seen, gets ``group_fallback_``: ``+inf`` (keep the whole pool, marked not
guaranteed: the pool itself can miss the gold) or the pooled threshold (marked not guaranteed: it
holds only over all groups together). A query
without a group gets the pooled threshold and its marginal guarantee. Label-conditional form
(:func:`with_chunk_groups`): the group is the gold chunk's metadata key, applied chunk by chunk, so
a gold chunk of group ``g`` is kept with probability >= ``1 - alpha`` given it lies in ``g``.

Examples
--------
>>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
>>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
>>> scores = tuple(i / 20 for i in range(20)) + (0.5, 0.6)
>>> labels = ("a",) * 20 + ("b",) * 2
>>> cal = with_groups(RetrievalCalibration(0.9, 0.1, "split", "relative", 5, 22, 0, scores, fp), labels, "tenant")
>>> threshold_for(cal, "a"), threshold_for(cal, "b"), threshold_for(cal, "zzz")
((0.95, 'group'), (inf, 'keep-all-small-group'), (inf, 'keep-all-unknown-group'))
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..core.errors import (
    CalibrationIntegrityError,
    ConformalError,
    InfiniteThresholdWarning,
    SmallGroupWarning,
)
from ..core.mondrian import check_fallback, check_group_label, group_thresholds
from ..core.selection import SetDecision, decide_chunk_set
from ..datasets.examples import CalibrationExample

#: A metadata key of the calibration examples, or a function of the question text.
GroupBy = str | Callable[[str], Any]

C = TypeVar("C")


def describe_group_by(group_by: GroupBy) -> str:
    """How a calibration records its grouping: the metadata key, or ``callable:<qualified name>``.

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

    Raises :class:`ConformalError` naming the question (missing key, raising function, bad label).

    >>> group_labels([CalibrationExample("Who?", gold_ids=("a",), metadata={"t": "x"})], "t")
    ('x',)
    """
    describe_group_by(group_by)
    return tuple(_label_of(group_by, ex) for ex in examples)


def chunk_group_labels(
    examples: Sequence[CalibrationExample], chunk_group_key: str, seen: Mapping[str, Any]
) -> tuple[str, ...]:
    """The group of every example's gold chunk, for a label-conditional calibration.

    From ``example.metadata[chunk_group_key]``, else from the gold chunk's metadata as the host
    returned it (``seen``). Both present must agree; gold chunks of one question must share a group.

    >>> ex = [CalibrationExample("Who?", gold_ids=("c1",)), CalibrationExample("When?", gold_ids=("c9",),
    ...       metadata={"collection": "faq"})]
    >>> chunk_group_labels(ex, "collection", {"c1": "wiki", "c9": "faq"})
    ('wiki', 'faq')
    """
    key = check_group_label(chunk_group_key, " (chunk_group_key)")
    out = []
    for ex in examples:
        where = f" for question {ex.question!r}"
        from_chunks = {check_group_label(seen[g], where) for g in ex.gold_ids if seen.get(g) not in (None, "")}
        if key in ex.metadata:
            label = check_group_label(ex.metadata[key], where)
            if from_chunks - {label}:
                raise ConformalError(
                    f"The calibration question {ex.question!r} says its gold chunk is in {key}={label!r}, but the "
                    f"host returned its gold chunk with {key}={sorted(from_chunks)}: fix the question or the chunk."
                )
        elif len(from_chunks) == 1:
            label = from_chunks.pop()
        elif from_chunks:
            raise ConformalError(
                f"The gold chunks of {ex.question!r} lie in several {key} groups {sorted(from_chunks)}; "
                f"give the question a {key!r} field saying which group it calibrates."
            )
        else:
            raise ConformalError(
                f"Cannot tell the {key!r} of the gold chunk of {ex.question!r}: the host never returned it with "
                f"metadata[{key!r}] (a miss, or chunks without the key). Give the question a {key!r} field "
                "(qa JSONL fields other than the known ones land in metadata), or the chunks that metadata."
            )
        out.append(label)
    return tuple(out)


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
        errors="raise" if strict else "warn" if warn else "ignore",
        fallback=cal.group_fallback_,
        miss_bound=getattr(cal, "miss_bound_", None),
    )
    return {g: v.to_dict() for g, v in out.items()}


def with_groups(
    cal: C, labels: Sequence[str], group_by: GroupBy, *, strict: bool = False, fallback: str = "keep_all"
) -> C:
    """A copy of ``cal`` with per-group thresholds for ``labels`` (aligned with its scores).

    A too-small group warns :class:`SmallGroupWarning` and gets ``fallback`` (also used for unseen
    groups), or raises :class:`~conformal_rag_plugins.core.errors.CalibrationError` with ``strict``.
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


def with_chunk_groups(
    cal: C, labels: Sequence[str], chunk_group_key: str, *, strict: bool = False, fallback: str = "keep_all"
) -> C:
    """A copy of ``cal`` with label-conditional thresholds: one per group of the *gold chunk*.

    Each group's threshold is the :func:`~conformal_rag_plugins.core.quantile.flagged_rank` of its scores
    (``+inf`` with a :class:`SmallGroupWarning` when ``n_g`` has none); see :func:`chunk_set`.

    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> scores = tuple(i / 20 for i in range(20)) + tuple(i / 100 for i in range(20))
    >>> cal = RetrievalCalibration(0.9, 0.1, "split", "relative", 5, 40, 0, scores, fp)
    >>> cal = with_chunk_groups(cal, ("wiki",) * 20 + ("faq",) * 20, "collection")
    >>> cal.chunk_group_key_, cal.groups_["wiki"]["threshold"], cal.groups_["faq"]["threshold"]
    ('collection', 0.95, 0.19)
    """
    key = check_group_label(chunk_group_key, " (chunk_group_key)")
    staged = with_groups(cal, labels, key, strict=strict, fallback=fallback)
    return replace(staged, chunk_group_key_=key)  # type: ignore[type-var]


def chunk_thresholds(cal: Any, labels: Sequence[Any]) -> tuple[list[float], list[str]]:
    """The threshold and its source for every candidate chunk of group ``labels[i]``.

    An unseen group or a missing key (``None``) gets ``group_fallback_`` (``+inf`` by default).

    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.95, 0.1, "split", "relative", 5, 20, 0, tuple(i / 20 for i in range(20)), fp)
    >>> cal = with_chunk_groups(cal, ("a",) * 20, "collection")
    >>> chunk_thresholds(cal, ["a", "b", None])
    ([0.95, inf, inf], ['group', 'keep-all-unknown-group', 'keep-all-unknown-group'])
    """
    thresholds, sources = [], []
    for label in labels:
        text = None if label is None else str(label)
        threshold, source = threshold_for(cal, text if text and text.strip() else "")
        thresholds.append(threshold)
        sources.append(source)
    return thresholds, sources


def chunk_set(
    cal: Any,
    scores: Any,
    labels: Sequence[Any],
    *,
    min_k: int | None = None,
    max_k: int | None = None,
    validate: bool = False,
) -> tuple[SetDecision, list[float], list[dict[str, Any]]]:
    """The label-conditional set of one query: its decision, every candidate's threshold and group metadata.

    Not guaranteed when a candidate got a pooled fallback (valid only over all groups) or ``+inf``
    (the pool may lack the gold chunk), or a calibrated group's threshold is ``+inf``.

    >>> import numpy as np
    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.95, 0.1, "split", "relative", 5, 20, 0, tuple(i / 20 for i in range(20)), fp)
    >>> cal = with_chunk_groups(cal, ("a",) * 20, "collection")
    >>> d, thr, meta = chunk_set(cal, np.array([1.0, 0.5, 0.0]), ["a", "a", "a"])
    >>> d.indices, d.guaranteed, meta[0]["conformal_group"]
    ((0, 1), True, 'a')
    """
    thresholds, sources = chunk_thresholds(cal, labels)
    problems = []
    whole = sorted(g for g, v in cal.groups_.items() if math.isinf(float(v["threshold"])))
    if whole:
        problems.append(
            f"chunk group(s) {', '.join(map(repr, whole))} have threshold +inf (too few calibration questions or too "
            "many misses): a gold chunk there is covered only if the pool holds it"
        )
    unknown = sorted({str(g) for g, s in zip(labels, sources, strict=True) if s.endswith("unknown-group")})
    if unknown:
        how = "the pooled threshold" if cal.group_fallback_ == "pooled" else "every chunk (+inf)"
        problems.append(
            f"chunk group(s) {', '.join(map(repr, unknown))} were not seen at calibration and got {how}, which is not "
            "guaranteed within those groups"
        )
    if any(s == "pooled-small-group" for s in sources):
        problems.append(
            "a group too small for its own threshold used the pooled one (group_fallback='pooled'), which covers only "
            "marginally over all groups"
        )
    reason = ("Label-conditional set: " + "; ".join(problems) + ".") if problems else ""
    decision = decide_chunk_set(
        cal.score_family_, scores, thresholds, min_k=min_k, max_k=max_k, validate=validate, not_guaranteed=reason
    )
    meta = [
        {"conformal_group": None if g is None else str(g), "conformal_threshold_source": s}
        for g, s in zip(labels, sources, strict=True)
    ]
    return decision, thresholds, meta


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
        **({"chunk_group_key": cal.chunk_group_key_} if getattr(cal, "chunk_group_key_", None) else {}),
        # whose groups, a second record beside chunk_group_key (not in files that did not have it: same checksum)
        **(
            {"grouping": "chunk" if getattr(cal, "chunk_group_key_", None) else "query"}
            if getattr(cal, "grouping_recorded_", True)
            else {}
        ),
    }


def threshold_for(cal: Any, group: str | None) -> tuple[float, str]:
    """``(threshold, source)`` for a query of ``group``; source is one of ``GROUP_SOURCES``.

    Unseen group: ``group_fallback_`` (``"keep-all-unknown-group"`` +inf, or
    ``"pooled-unknown-group"``). ``None``: pooled (``"pooled-no-group"``, marginal guarantee).
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

    The pooled threshold holds only over all groups together. A ``+inf`` keep-all set is already marked
    not guaranteed by :func:`~conformal_rag_plugins.core.selection.decide_set`: the pool can miss the gold.

    >>> d = SetDecision((0, 1), 2, True, "")
    >>> marked = mark_group_fallback(d, {"conformal_threshold_source": "pooled-small-group"})
    >>> marked.guaranteed, marked.reason[:40], mark_group_fallback(d, {"conformal_threshold_source": "group"}) is d
    (False, 'The pooled threshold was used for a grou', True)
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
    if getattr(cal, "chunk_group_key_", None):
        raise ConformalError(
            f"This calibration has per-chunk-group thresholds (chunk_group_key={cal.chunk_group_key_!r}): each "
            "chunk's threshold comes from its own metadata, so group= and group_by= do not apply."
        )
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

    >>> from conformal_rag_plugins import Fingerprint, RetrievalCalibration
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
