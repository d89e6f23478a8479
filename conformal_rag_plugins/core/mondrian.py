"""Per-group (Mondrian) thresholds: one split-conformal or PAC threshold per group of questions.

Each group's threshold uses that group's scores only, so coverage ``>= 1 - alpha`` holds *within*
each group, and given the group's flag when its pool misses at most ``alpha / 2`` of its questions
(:func:`~.quantile.flagged_rank`, with the group's own ``n``). A group too small for a flagged rank
gets ``+inf`` by default (``fallback="keep_all"``: every candidate, and not flagged guaranteed, since
the pool itself can miss) or the pooled threshold (``"pooled"``: only marginal over all groups, so
the sets are marked not guaranteed); ``strict=True`` raises. Too many misses keep a group's ``+inf``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import CalibrationError, ConformalError, InfiniteThresholdWarning, SmallGroupWarning
from .quantile import conformal_quantile, flagged_min_calibration_size, flagged_rank, pac_quantile, pac_rank
from .validation import check_alpha

#: Where a query's threshold came from: its group's own; keep every candidate (``+inf``) for a group too
#: small for a finite rank or never seen at calibration; the pooled one (``fallback="pooled"``, which
#: holds only over all groups together); or the pooled one for a query without a group.
GROUP_SOURCES = (
    "group",
    "keep-all-small-group",
    "keep-all-unknown-group",
    "pooled-small-group",
    "pooled-unknown-group",
    "pooled-no-group",
)

#: What a group without a threshold of its own gets: every candidate (``+inf``), or the pooled threshold.
GROUP_FALLBACKS = ("keep_all", "pooled")

#: What :func:`group_thresholds` does about a too-small group or a group rank on a miss.
GROUP_ERRORS = ("warn", "raise", "ignore")


def check_fallback(fallback: object) -> str:
    """``fallback`` if it is one of :data:`GROUP_FALLBACKS`, else :class:`ConformalError`.

    Examples
    --------
    >>> check_fallback("pooled")
    'pooled'
    """
    if fallback not in GROUP_FALLBACKS:
        raise ConformalError(f"fallback must be one of {GROUP_FALLBACKS}, got {fallback!r}.")
    return str(fallback)


@dataclass(frozen=True)
class GroupThreshold:
    """One group's calibration: size ``n``, threshold and its ``source`` (``"group"`` or a small-group fallback)."""

    n: int
    threshold: float
    source: str

    def to_dict(self) -> dict[str, object]:
        """JSON-ready ``{"n", "threshold", "source"}`` (the threshold as a float; the caller encodes ``inf``)."""
        return {"n": self.n, "threshold": self.threshold, "source": self.source}


def check_group_label(label: object, where: str = "") -> str:
    """A group label as a non-empty string (str or int accepted), or :class:`ConformalError`.

    Examples
    --------
    >>> check_group_label(3)
    '3'
    >>> check_group_label("")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: A group label must be a non-empty string, got ''.
    """
    if isinstance(label, bool) or not isinstance(label, str | int):
        raise ConformalError(f"A group label must be a non-empty string{where}, got {label!r}.")
    text = str(label)
    if not text.strip():
        raise ConformalError(f"A group label must be a non-empty string{where}, got {label!r}.")
    return text


def is_small_group(
    n: int, alpha: float, *, method: str = "split", delta: float | None = None, miss_bound: float | None = None
) -> bool:
    """True when ``n`` questions give no finite rank (split: no :func:`~.quantile.flagged_rank`; PAC: no rank).

    Examples
    --------
    >>> is_small_group(17, 0.1), is_small_group(18, 0.1)
    (True, False)
    """
    if n < 1:
        return True
    if method == "pac":
        if delta is None:
            raise CalibrationError("method='pac' needs delta.")
        return pac_rank(n, alpha, delta) is None
    return flagged_rank(n, alpha, miss_bound) is None


def group_thresholds(
    scores: Sequence[float] | np.ndarray,
    groups: Sequence[Hashable],
    alpha: float,
    *,
    pooled: float,
    method: str = "split",
    delta: float | None = None,
    errors: str = "warn",
    fallback: str = "keep_all",
    miss_bound: float | None = None,
) -> dict[str, GroupThreshold]:
    """The threshold of every group, computed on that group's scores only.

    Returns label -> :class:`GroupThreshold`, sorted by label. ``errors`` says what a small group or
    a rank on a miss does: warn (:class:`SmallGroupWarning` / :class:`InfiniteThresholdWarning`),
    stay silent (``"ignore"``, trial simulations) or raise :class:`CalibrationError`. ``miss_bound`` is the
    share of each group's questions its pool may miss (``None``: ``alpha / 2``).

    Examples
    --------
    >>> s = [i / 20 for i in range(20)] + [0.5, 0.6]
    >>> g = ["a"] * 20 + ["b"] * 2
    >>> out = group_thresholds(s, g, 0.1, pooled=0.9, errors="ignore")
    >>> out["a"].threshold, out["b"].source, out["b"].threshold
    (0.95, 'keep-all-small-group', inf)
    >>> group_thresholds(s, g, 0.1, pooled=0.9, errors="ignore", fallback="pooled")["b"].threshold
    0.9
    """
    alpha = check_alpha(alpha)
    fallback = check_fallback(fallback)
    if errors not in GROUP_ERRORS:
        raise ConformalError(f"errors must be one of {GROUP_ERRORS}, got {errors!r}.")
    strict, warn = errors == "raise", errors == "warn"
    if method not in ("split", "pac"):
        raise CalibrationError(f"method must be 'split' or 'pac', got {method!r}.")
    arr = np.asarray(scores, dtype=float).ravel()
    labels = [check_group_label(g, f" (calibration question {i})") for i, g in enumerate(groups)]
    if arr.size != len(labels):
        raise ConformalError(f"{arr.size} scores but {len(labels)} group labels: give one group per question.")
    if arr.size == 0:
        raise CalibrationError("No calibration questions: every group needs questions to calibrate on.")
    if np.isnan(arr).any():
        bad = int(np.flatnonzero(np.isnan(arr))[0])
        raise ConformalError(f"Calibration score {bad} (group {labels[bad]!r}) is NaN; scores must be numbers.")
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(labels):
        by_group.setdefault(g, []).append(i)
    out: dict[str, GroupThreshold] = {}
    for g in sorted(by_group):
        g_scores = arr[by_group[g]]
        n = int(g_scores.size)
        if is_small_group(n, alpha, method=method, delta=delta, miss_bound=miss_bound):
            need = f"at least {flagged_min_calibration_size(alpha, miss_bound)}" if method == "split" else "more"
            what = (
                "it uses the pooled threshold, which covers only marginally over all groups, not within this "
                "group (its sets are marked not guaranteed)"
                if fallback == "pooled"
                else "its queries keep every candidate (threshold +inf, not flagged guaranteed)"
            )
            message = (
                f"Group {g!r} has {n} calibration question(s), too few for a finite threshold at alpha={alpha} "
                f"({need} needed): {what}."
            )
            if strict:
                raise CalibrationError(message)
            if warn:
                warnings.warn(message, SmallGroupWarning, stacklevel=2)
            if fallback == "pooled":
                out[g] = GroupThreshold(n, float(pooled), "pooled-small-group")
            else:
                out[g] = GroupThreshold(n, math.inf, "keep-all-small-group")
            continue
        with warnings.catch_warnings():
            if not warn:
                warnings.simplefilter("ignore", InfiniteThresholdWarning)
            try:
                q = (
                    pac_quantile(g_scores, alpha, delta, strict=strict, miss_bound=miss_bound)  # type: ignore[arg-type]
                    if method == "pac"
                    else conformal_quantile(g_scores, alpha, strict=strict, miss_bound=miss_bound)
                )
            except CalibrationError as exc:
                raise CalibrationError(f"Group {g!r}: {exc}") from None
        out[g] = GroupThreshold(n, q, "group")
    return out
