"""Which way a store's raw scores point, read from the order of its best-first results.

A store without relevance scores returns raw scores: similarities (higher is better) or distances
(lower is better). The adapters read the direction once from a probe query and then check every
result list against it, so a store whose scale changed is refused instead of served the wrong way.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise


def score_direction(scores: Sequence[float]) -> str | None:
    """``"similarity"`` when best-first scores only fall, ``"distance"`` when they only rise, else ``None``.

    ``None``: the scores run both ways, or fewer than two of them differ.

    >>> score_direction([0.9, 0.5, 0.5]), score_direction([0.1, 0.4]), score_direction([0.3, 0.3])
    ('similarity', 'distance', None)
    """
    down = any(b < a for a, b in pairwise(scores))
    up = any(b > a for a, b in pairwise(scores))
    if down == up:
        return None
    return "similarity" if down else "distance"


def runs_against(scores: Sequence[float], kind: str) -> bool:
    """Whether best-first ``scores`` read as ``kind`` (``"similarity"`` or ``"distance"``) are out of order.

    >>> runs_against([0.9, 0.5], "similarity"), runs_against([0.9, 0.5], "distance")
    (False, True)
    """
    if kind == "distance":
        return any(b < a for a, b in pairwise(scores))
    return any(b > a for a, b in pairwise(scores))


def higher_is_better(score: float, kind: str) -> float:
    """A raw score on the higher-is-better scale: a distance negated, a similarity as it is.

    >>> higher_is_better(0.25, "distance"), higher_is_better(0.25, "similarity")
    (-0.25, 0.25)
    """
    return -float(score) if kind == "distance" else float(score)
