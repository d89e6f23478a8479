"""Candidate pools as a host returns them, and the observations calibration makes of them (never recomputing a score).

:func:`~.conformalizer.calibrate_from_pools` turns the observations into a threshold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import CalibrationError
from ..core.pools import PoolObservation
from ..datasets.examples import CalibrationExample
from ..datasets.gold_ids import gold_ids_error
from .gold_matching import gold_positions

#: Example metadata keys whose values are counted into ``RetrievalCalibration.labels_``.
LABEL_KEYS = ("gold_rule", "label_rule")


@dataclass(frozen=True)
class CandidatePool:
    """One query's candidates exactly as the host returned them, best first (``groups``: a chunk metadata value each).

    >>> CandidatePool.from_unsorted(["a", "b"], ["x", "y"], [0.1, 0.9], groups=["g", None]).groups
    (None, 'g')
    """

    ids: tuple[str | None, ...]
    texts: tuple[str, ...]
    scores: np.ndarray
    groups: tuple[Any, ...] | None = None

    @classmethod
    def from_unsorted(
        cls,
        ids: Sequence[str | None],
        texts: Sequence[str],
        scores: Sequence[float | None],
        groups: Sequence[Any] | None = None,
    ) -> CandidatePool:
        """Sort by score, best first (stable), refusing missing or NaN scores (``groups`` follow their candidates)."""
        if any(s is None for s in scores):
            raise CalibrationError(
                "The host retriever returned a candidate without a score; conformal retrieval needs scores."
            )
        arr = np.asarray(scores, dtype=float)
        if np.isnan(arr).any():
            raise CalibrationError("The host retriever returned a NaN score.")
        order = np.argsort(-arr, kind="stable")
        kept = None if groups is None else tuple(groups[i] for i in order)
        return cls(tuple(ids[i] for i in order), tuple(texts[i] for i in order), arr[order], kept)


def check_gold_ids(
    examples: Sequence[CalibrationExample],
    known_ids: Collection[str],
    *,
    document_key: str | None = None,
    also: str | None = None,
) -> None:
    """Raise the one gold-id error (:func:`~..datasets.gold_ids.gold_ids_error`) when a gold id is unknown.

    ``known_ids``: every id accepted here (chunk ids, and any document or parent ids already resolved);
    a typo would otherwise look like a miss.

    >>> check_gold_ids([CalibrationExample("q", gold_ids=("a",))], {"a"})
    """
    gold = {g for ex in examples for g in ex.gold_ids}
    missing = sorted(g for g in gold if g not in known_ids)
    if missing:
        raise gold_ids_error(missing, n_chunk_ids=len(gold) - len(missing), document_key=document_key, also=also)


def label_counts(examples: Sequence[CalibrationExample]) -> dict[str, dict[str, int]]:
    """Count how the gold labels were made (``metadata["gold_rule"]`` / ``["label_rule"]``).

    >>> ex = [CalibrationExample("q", gold_ids=("a",), metadata={"gold_rule": "answer-in-chunk"})] * 2
    >>> label_counts(ex)
    {'gold_rule': {'answer-in-chunk': 2}}
    """
    out: dict[str, dict[str, int]] = {}
    for key in LABEL_KEYS:
        counts = Counter(str(ex.metadata[key]) for ex in examples if key in ex.metadata)
        if counts:
            out[key] = dict(sorted(counts.items()))
    return out


def check_labelled(examples: Sequence[CalibrationExample]) -> None:
    """Raise unless there are examples and each has gold ids or gold texts (before any query).

    >>> check_labelled([CalibrationExample("q", gold_ids=("a",))])
    """
    if not examples:
        raise CalibrationError("No calibration examples were given; pass at least one labelled question.")
    unlabeled = [ex.question for ex in examples if not ex.gold_ids and not ex.gold_texts]
    if unlabeled:
        raise CalibrationError(
            f"{len(unlabeled)} example(s) have neither gold ids nor gold texts, e.g. {unlabeled[0]!r}. "
            "Label them, or generate labels with the LLM judge."
        )


def collect_observations(
    examples: Sequence[CalibrationExample],
    fetch_pool: Callable[[str], CandidatePool],
    *,
    progress: bool = True,
) -> list[PoolObservation]:
    """Query the host once per example and locate its gold chunks in the pool."""
    check_labelled(examples)
    from ..runtime.progress import progress_bar

    return [
        observe(ex, fetch_pool(ex.question))
        for ex in progress_bar(examples, desc="calibrating", unit="q", enabled=progress)
    ]


def observe(
    example: CalibrationExample, pool: CandidatePool, costs: Mapping[str, float] | None = None
) -> PoolObservation:
    """One question's observation: pool scores, gold positions, and optional per-candidate ``costs`` (missing raises).

    >>> pool = CandidatePool(("a", "b"), ("x", "y"), np.array([0.9, 0.5]))
    >>> obs = observe(CalibrationExample("q", gold_ids=("b",)), pool, {"a": 10, "b": 30})
    >>> obs.gold_positions, obs.costs.tolist()
    ((1,), [10.0, 30.0])
    """
    positions = gold_positions(example, pool.ids, pool.texts)
    n_gold = max(
        len(set(example.gold_ids)) if example.gold_ids else len({t.strip() for t in example.gold_texts}), len(positions)
    )
    cost_array = None
    if costs is not None:
        try:
            cost_array = np.array([float(costs[str(i)]) for i in pool.ids], dtype=float)
        except KeyError as exc:
            raise CalibrationError(f"No context-token count for candidate {exc.args[0]!r}.") from None
    return PoolObservation(pool.scores, positions, question_id=example.digest, n_gold=n_gold, costs=cost_array)
