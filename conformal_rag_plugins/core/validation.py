"""Input checks shared by the core functions."""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

import numpy as np

from .errors import CalibrationError, ConformalError

#: The confidence level every calibration (retrieval, answer sets, tuned) uses when none is given.
DEFAULT_CONFIDENCE_LEVEL = 0.9


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """Return ``alpha`` as a float, or raise if it is not strictly inside (0, 1).

    Examples
    --------
    >>> check_alpha(0.1)
    0.1
    """
    try:
        value = float(alpha)
    except (TypeError, ValueError) as exc:
        raise ConformalError(f"{name} must be a number in (0, 1), got {alpha!r}.") from exc
    if not (0.0 < value < 1.0) or math.isnan(value):
        raise ConformalError(
            f"{name} must lie strictly between 0 and 1, got {alpha!r}. "
            f"For 90% coverage pass {name}=0.1 (or confidence_level=0.9)."
        )
    return value


def alpha_from_confidence_level(confidence_level: float, name: str = "confidence_level") -> float:
    """The target miscoverage ``alpha = 1 - confidence_level``: the library's one conversion of a level.

    Computed in decimal on the level as written, so ``0.9`` gives ``0.1`` (not ``0.09999999999999998``,
    which would move the finite-sample rank ``ceil((n+1)(1-alpha))`` up by one where it is a whole
    number). The same function turns an ``alpha`` back into its level.

    Parameters
    ----------
    confidence_level : float
        Strictly between 0 and 1.
    name : str, default "confidence_level"
        How the error names the value (e.g. ``"--confidence-level"``).

    Returns
    -------
    float
        ``1 - confidence_level``, strictly between 0 and 1.

    Raises
    ------
    ConformalError
        Not a number, or not strictly between 0 and 1.

    Examples
    --------
    >>> alpha_from_confidence_level(0.9), alpha_from_confidence_level(0.95)
    (0.1, 0.05)
    >>> alpha_from_confidence_level(1.0)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: confidence_level must lie strictly between 0 and 1, got 1.0. ...
    """
    try:
        level = float(confidence_level)
    except (TypeError, ValueError) as exc:
        raise ConformalError(f"{name} must be a number in (0, 1), got {confidence_level!r}.") from exc
    if not (0.0 < level < 1.0) or math.isnan(level):
        raise ConformalError(
            f"{name} must lie strictly between 0 and 1, got {confidence_level!r}. "
            "For 90% coverage pass confidence_level=0.9 (alpha=0.1)."
        )
    return float(1 - Decimal(repr(level)))


def check_pool_size(pool_size: object, name: str = "pool_size") -> int:
    """Return ``pool_size`` if it is an integer >= 1, else raise (0 never means "the default").

    Examples
    --------
    >>> check_pool_size(50)
    50
    """
    if isinstance(pool_size, bool) or not isinstance(pool_size, int | np.integer) or int(pool_size) < 1:
        raise ConformalError(f"{name} must be a whole number >= 1 (candidates fetched per query), got {pool_size!r}.")
    return int(pool_size)


def check_scores(scores: Iterable[float], *, allow_pos_inf: bool = True) -> np.ndarray:
    """Return nonconformity scores as a 1-d float array after checking them.

    ``+inf`` (a miss) is allowed by default; NaN and ``-inf`` are always refused.

    Examples
    --------
    >>> check_scores([0.2, 0.1, float("inf")]).shape
    (3,)
    """
    arr = np.asarray(list(scores) if not isinstance(scores, np.ndarray) else scores, dtype=float)
    if arr.ndim != 1:
        arr = arr.ravel()
    if arr.size == 0:
        raise CalibrationError("No calibration scores were given. Pass at least one labelled calibration example.")
    if np.isnan(arr).any():
        raise CalibrationError(
            f"{int(np.isnan(arr).sum())} calibration score(s) are NaN. Check the host retriever's "
            "scores; a miss should be +inf, never NaN."
        )
    if np.isneginf(arr).any():
        raise CalibrationError("Nonconformity scores must not be -inf (lower conforms better).")
    if not allow_pos_inf and np.isposinf(arr).any():
        raise CalibrationError("Nonconformity scores must be finite here.")
    return arr
