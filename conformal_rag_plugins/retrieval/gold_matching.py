"""Locate an example's gold chunks in a candidate pool (by id or by exact text)."""

from __future__ import annotations

from collections.abc import Sequence

from ..datasets.examples import CalibrationExample


def gold_positions(
    example: CalibrationExample, candidate_ids: Sequence[str | None], candidate_texts: Sequence[str]
) -> tuple[int, ...]:
    """0-based positions of the example's gold chunks among the candidates.

    >>> gold_positions(CalibrationExample("q", gold_ids=("b",)), ["a", "b"], ["x", "y"])
    (1,)
    """
    ids = set(example.gold_ids)
    texts = {t.strip() for t in example.gold_texts}
    return tuple(
        i
        for i, (cid, text) in enumerate(zip(candidate_ids, candidate_texts, strict=True))
        if (cid is not None and cid in ids) or (texts and text.strip() in texts)
    )
