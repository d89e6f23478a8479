"""The end-to-end rule of one query on a grouped retrieval stage: each group's own retrieval threshold.

The pooled retrieval threshold holds only over all groups together; served on a per-group set it
under-covers the hard groups (issue 41, item 1). When the answer-set calibration's retrieval stage has
per-group thresholds (:meth:`~.calibration.AnswerSetCalibration.retrieval_stage`, refitted at
``alpha_retrieval_``), a query of group ``g`` gets the stage rule with ``g``'s threshold (HMP: p-values
among ``g``'s calibration scores), and a label-conditional stage (``chunk_group_key``) gives every chunk
its own group's. Each group's retrieval stage then misses with probability ``<= alpha_retrieval_`` given
that group (and given its flag), so the union bound with the pooled generator stage still gives the
marginal end-to-end ``1 - alpha_``. A group whose threshold is a fallback (too small, or unseen at
calibration) is not guaranteed, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.combination import EndToEndDecision, HarmonicMeanRule, Rule, decide_end_to_end
from ..core.errors import ConformalError
from ..retrieval.groups import threshold_for
from .calibration import AnswerSetCalibration

#: The threshold sources of a group that has a threshold of its own (see ``core.mondrian.GROUP_SOURCES``).
OWN_SOURCES = ("group", "pooled-no-group")


@dataclass(frozen=True)
class ChunkRules:
    """The end-to-end rule of every chunk of one query (aligned with the chunks) and why it is not guaranteed.

    ``thresholds`` is each chunk's retrieval threshold (what its retriever must have served at least),
    ``groups`` the group each rule belongs to (``None``: the pooled rule) and ``reason`` is empty when
    every group rule is its own (no fallback) and, label-conditional, every calibrated group is guaranteed.
    """

    rules: tuple[Rule, ...]
    thresholds: tuple[float, ...]
    groups: tuple[str | None, ...]
    reason: str = ""

    def retrieval_mask(self, nonconformity: Sequence[float] | np.ndarray) -> np.ndarray:
        """The chunks each chunk's own rule keeps in the retrieval stage."""
        arr = np.asarray(nonconformity, dtype=float)
        return np.array([bool(r.retrieval_mask(arr[i : i + 1])[0]) for i, r in enumerate(self.rules)], dtype=bool)


def _group_scores(stage: Any, group: str) -> np.ndarray:
    labels = stage.group_labels_
    return np.sort(np.array([s for s, g in zip(stage.scores_, labels, strict=True) if g == group], dtype=float))


def group_rule(calibration: AnswerSetCalibration, group: str | None, *, stage: Any = None) -> tuple[Rule, float, str]:
    """The end-to-end rule of a query of ``group``, its retrieval threshold, and why it is not guaranteed.

    ``group=None`` (or an ungrouped calibration) is the pooled rule :meth:`AnswerSetCalibration.rule`
    with its marginal guarantee. Bonferroni and PAC replace the retrieval threshold ``q_ret`` by the
    group's threshold in :meth:`AnswerSetCalibration.retrieval_stage` (fitted at ``alpha_retrieval_``,
    PAC ``delta_retrieval_``); HMP computes the retrieval p-values among the group's scores. A fallback
    threshold (``group_fallback_``: pooled or ``+inf``) is used as served and marked not guaranteed.

    Examples
    --------
    >>> from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
    >>> from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
    >>> from conformal_rag_plugins.retrieval.groups import with_groups
    >>> scores = tuple(i / 100 for i in range(100)) + tuple(0.5 + i / 100 for i in range(100))
    >>> ret = RetrievalCalibration(1.0, 0.1, "split", "relative", 5, 200, 0, scores,
    ...                            Fingerprint("none", "list", "cosine", "toy", 2, "cosine"))
    >>> ret = with_groups(ret, ("easy",) * 100 + ("hard",) * 100, "tenant")
    >>> cal = AnswerSetCalibration.from_stages(ret, [-1.0] * 200, alpha=0.2, n_samples=4, model="m",
    ...                                        clustering={"method": "exact"})
    >>> group_rule(cal, "easy")[1] < cal.rule().q_ret < group_rule(cal, "hard")[1]  # pooled: too small for "hard"
    True
    >>> group_rule(cal, "new")[2][:58]
    "Group 'new' has no retrieval threshold of its own at alpha"
    """
    base = calibration.rule()
    stage = calibration.retrieval_stage() if stage is None else stage
    if group is None or not stage.groups_:
        return base, float(calibration.retrieval_threshold_), ""
    threshold, source = threshold_for(stage, group)
    level = f"alpha_retrieval={stage.alpha_:.4g}"
    if source not in OWN_SOURCES:
        why = "it was not seen at calibration" if "unknown" in source else "it has too few calibration questions"
        used = "the pooled threshold" if source.startswith("pooled") else "+inf (every candidate)"
        reason = (
            f"Group {group!r} has no retrieval threshold of its own at {level} ({why}): its set used {used}, "
            "which is not guaranteed within this group."
        )
        return (base if source.startswith("pooled") else _with_threshold(base, threshold, None)), threshold, reason
    own = _with_threshold(base, threshold, _group_scores(stage, group))
    reason = ""
    if not own.guaranteed:
        n = int(stage.groups_[group]["n"])
        reason = f"Group {group!r} ({n} calibration questions) has no guaranteed retrieval threshold at {level}."
    return own, threshold, reason


def _with_threshold(base: Rule, threshold: float, scores: np.ndarray | None) -> Rule:
    """``base`` with the retrieval threshold ``threshold`` (HMP: the retrieval p-values among ``scores``)."""
    if isinstance(base, HarmonicMeanRule):
        if scores is None:  # a keep-all fallback: the HMP rule on the pooled p-values, marked not guaranteed
            return base
        return replace(base, ret_calibration=scores)
    return replace(base, q_ret=float(threshold))


def chunk_rules(calibration: AnswerSetCalibration, groups: Sequence[str | None]) -> ChunkRules:
    """The rule of every chunk of one query from the group its retriever served (``conformal_group``).

    Per-query groups (``group_by``): every chunk must carry the same group, the query's. Label-conditional
    groups (``chunk_group_key``): each chunk has its own group's rule (a chunk without one, an unseen
    group), and the set is guaranteed only if every calibrated group's rule is (the gold chunk's group is
    not known at query time). An ungrouped calibration gives every chunk the pooled rule.
    """
    stage = calibration.retrieval_stage()
    if not stage.groups_:
        n = len(groups)
        return ChunkRules((calibration.rule(),) * n, (float(calibration.retrieval_threshold_),) * n, (None,) * n)
    if getattr(stage, "chunk_group_key_", None):
        return _label_conditional(calibration, stage, groups)
    served = sorted({str(g) for g in groups if g is not None})
    mixed = served + ["(no group)"] * any(g is None for g in groups)
    if len(mixed) > 1:
        raise ConformalError(
            f"The retrieved chunks were served for different groups {mixed}: one query has one group, so pass the "
            "chunks of one ConformalRetriever call (options=ServingOptions(group=...))."
        )
    group = served[0] if served else None
    rule, threshold, reason = group_rule(calibration, group, stage=stage)
    return ChunkRules((rule,) * len(groups), (threshold,) * len(groups), (group,) * len(groups), reason)


def _label_conditional(calibration: AnswerSetCalibration, stage: Any, groups: Sequence[str | None]) -> ChunkRules:
    by_group: dict[str, tuple[Rule, float, str]] = {}
    for g in stage.groups_:
        by_group[g] = group_rule(calibration, g, stage=stage)
    labels = ["" if g is None or not str(g).strip() else str(g) for g in groups]
    for g in labels:
        if g not in by_group:
            by_group[g] = group_rule(calibration, g, stage=stage)
    problems = [by_group[g][2] for g in sorted(stage.groups_) if by_group[g][2]]
    problems += [by_group[g][2] for g in sorted(set(labels) - set(stage.groups_))]
    reason = ""
    if problems:
        reason = (
            "Label-conditional retrieval stage (the gold chunk's group is unknown at query time, so every group "
            "must hold): " + " ".join(problems)
        )
    return ChunkRules(
        tuple(by_group[g][0] for g in labels),
        tuple(by_group[g][1] for g in labels),
        tuple(g or None for g in labels),
        reason,
    )


def decide_chunks(
    rules: ChunkRules,
    chunk_ids: Sequence[str],
    nonconformity: Sequence[float] | np.ndarray,
    clusters_by_chunk: Mapping[str, Sequence[Any]],
    fallback: Rule,
) -> EndToEndDecision:
    """:func:`~conformal_rag_plugins.core.combination.decide_end_to_end` with every chunk's own rule.

    Chunks sharing a rule are decided together; the decisions are merged in the chunks' order
    (``fallback`` decides an empty query). Guaranteed only when every rule used is.
    """
    ids = [str(c) for c in chunk_ids]
    arr = np.asarray(nonconformity, dtype=float)
    if not ids:
        return decide_end_to_end(fallback, [], arr, clusters_by_chunk)
    parts: dict[int, list[int]] = {}
    for i, rule in enumerate(rules.rules):
        parts.setdefault(id(rule), []).append(i)
    decisions = []
    for members in parts.values():
        decided = decide_end_to_end(rules.rules[members[0]], [ids[i] for i in members], arr[members], clusters_by_chunk)
        decisions.append(decided)
    if len(decisions) == 1:
        return decisions[0]
    order = {cid: i for i, cid in enumerate(ids)}
    kept = sorted((cid for d in decisions for cid in d.retrieval_set), key=order.__getitem__)
    pairs = sorted((p for d in decisions for p in d.pairs), key=lambda p: order[p.chunk_id])
    reasons = " ".join(dict.fromkeys(d.reason for d in decisions if not d.guaranteed and d.reason))
    return replace(
        decisions[0],
        retrieval_set=tuple(kept),
        pairs=tuple(pairs),
        guaranteed=all(d.guaranteed for d in decisions),
        reason=reasons,
    )
