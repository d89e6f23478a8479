"""The recall-controlling side of a retrieval calibration: which threshold rule, and its consistency checks.

With ``risk_ == "recall"`` the threshold is conformal risk control (``"crc"``) or Learn-then-Test
(``"ltt"``) on ``gold_scores_`` (:mod:`conformal_rag_plugins.core.quantile`), recomputed on load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..core.errors import CalibrationError, CalibrationIntegrityError
from ..core.quantile import crc_threshold, ltt_threshold

#: What a threshold may control, as recorded in ``risk_``.
RISKS = ("miscoverage", "recall")
#: The ``control=`` values of the calibration drivers (``coverage`` -> ``miscoverage`` risk).
CONTROLS = ("coverage", "recall")
#: Threshold rules for ``risk_ == "recall"``.
RECALL_METHODS = ("crc", "ltt")


def recall_method(method: str) -> str:
    """Map a driver's ``method`` to the recall rule: ``split``/``crc`` -> ``crc``, ``pac``/``ltt`` -> ``ltt``.

    >>> recall_method("split"), recall_method("ltt")
    ('crc', 'ltt')
    """
    mapped = {"split": "crc", "crc": "crc", "pac": "ltt", "ltt": "ltt"}.get(method)
    if mapped is None:
        raise CalibrationError(
            f"With control='recall' method must be 'crc' (or 'split', the same) or 'ltt' (or 'pac'), got {method!r}."
        )
    return mapped


def recall_threshold(
    gold_scores: Sequence[Sequence[float]],
    alpha: float,
    method: str,
    delta: float | None,
    *,
    strict: bool = False,
    miss_bound: float | None = None,
) -> float:
    """The recall threshold of ``method`` (``crc`` or ``ltt``, which needs ``delta``); ``miss_bound`` as in the core.

    >>> recall_threshold([[i / 40] for i in range(1, 41)], 0.1, "crc", None, miss_bound=0)
    0.925
    """
    if method == "crc":
        return crc_threshold(gold_scores, alpha, strict=strict, miss_bound=miss_bound)
    if method == "ltt":
        if delta is None:
            raise CalibrationIntegrityError("A Learn-then-Test recall calibration without delta.")
        return ltt_threshold(gold_scores, alpha, delta, strict=strict, miss_bound=miss_bound)
    raise CalibrationIntegrityError(f"A recall calibration must use method 'crc' or 'ltt', not {method!r}.")


def check_risk_fields(cal: Any) -> None:
    """Raise :class:`CalibrationIntegrityError` unless ``risk_``, ``method_`` and ``gold_scores_`` agree.

    For recall, each ``scores_`` entry must be the minimum of its question's gold nonconformities.
    """
    if cal.risk_ not in RISKS:
        raise CalibrationIntegrityError(f"risk must be one of {RISKS}, got {cal.risk_!r}.")
    if cal.risk_ == "miscoverage":
        if cal.gold_scores_:
            raise CalibrationIntegrityError("A miscoverage calibration carries per-gold recall scores.")
        if cal.method_ in RECALL_METHODS:
            raise CalibrationIntegrityError(f"Method {cal.method_!r} controls recall, but risk is 'miscoverage'.")
        return
    if cal.method_ not in RECALL_METHODS:
        raise CalibrationIntegrityError(f"A recall calibration must use method 'crc' or 'ltt', not {cal.method_!r}.")
    if len(cal.gold_scores_) != len(cal.scores_):
        raise CalibrationIntegrityError(
            f"The recall calibration records gold scores for {len(cal.gold_scores_)} questions but "
            f"{len(cal.scores_)} scores."
        )
    for i, (gold, best) in enumerate(zip(cal.gold_scores_, cal.scores_, strict=True)):
        if not gold or any(math.isnan(g) or g == -math.inf for g in gold):
            raise CalibrationIntegrityError(f"Recall calibration question {i} has no gold score, or a NaN or -inf one.")
        if min(gold) != best:
            raise CalibrationIntegrityError(
                f"Recall calibration question {i}: its score {best!r} is not the best of its gold scores {min(gold)!r}."
            )
