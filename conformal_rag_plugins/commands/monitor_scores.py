"""Which scores ``conformal-rag monitor`` watches: the served pool, or the dense similarities behind a fusion.

A fusion host (the default tuned hybrid: z-score or min-max fusion) normalises each query's scores, so its
served top-1 stays in place when the questions move away from the corpus: on a harmful shift it raised no
alarm in 476 queries. The raw dense similarity of the same question on the same collection can move, so a
hybrid host is watched through it (``auto``); a dense or BM25 host serves raw scores and is watched as served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import ConformalError

#: ``--monitor-scores`` choices; ``auto`` picks per host (:func:`score_source`).
MONITOR_SCORES = ("auto", "served", "dense")


def score_source(given: str | None, kind: str, resumed: str | None = None) -> str:
    """The score source for a host ``kind`` (``"dense"``, ``"bm25"``, ``"hybrid"``): ``given``, or ``auto``'s pick.

    ``resumed``: the source a resumed state fixes (a differing ``given`` is refused).

    Examples
    --------
    >>> score_source(None, "hybrid"), score_source("auto", "dense"), score_source("served", "hybrid")
    ('dense', 'served', 'served')
    """
    if given is not None and given not in MONITOR_SCORES:
        raise ConformalError(f"--monitor-scores must be one of {', '.join(MONITOR_SCORES)}, got {given!r}.")
    if resumed is not None:
        if given not in (None, "auto", resumed):
            raise ConformalError(
                f"--monitor-scores {given} disagrees with the resumed state, which watches the {resumed} scores; "
                "leave --monitor-scores out."
            )
        return resumed
    if given == "dense" and kind != "hybrid":
        raise ConformalError(
            f"--monitor-scores dense watches the dense similarities behind a fusion; this {kind} host has none "
            "(use served, or auto)."
        )
    if given in (None, "auto"):
        return "dense" if kind == "hybrid" else "served"
    return given


def dense_feed(monitor: Any, fetch: Callable[[str], Any]) -> Callable[[str], None]:
    """``feed(question)``: observe the question's dense pool (``fetch(question).scores``, any order) on ``monitor``."""

    def feed(question: str) -> None:
        scores = np.asarray(fetch(question).scores, dtype=float)
        monitor.observe(-np.sort(-scores))

    return feed
