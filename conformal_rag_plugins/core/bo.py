"""Bayesian optimisation of the combination's free parameter (TRAQ, TRAC).

The guarantee of every combination rule holds for *any* fixed split of alpha
(or HMP weight); the split only changes the set sizes. TRAQ/TRAC choose it by
Bayesian optimisation (``skopt.gp_minimize``) of the mean set size on an
*optimisation split* that is disjoint from the calibration split: the user's
objective must compute each candidate's thresholds and sizes on that split
only. The final thresholds are then computed on the calibration split.

Two choices here differ from TRAQ's code on purpose:

* the search range is the full open interval, ``[1e-3 * alpha, (1 - 1e-3) * alpha]``
  for the split and ``[1e-3, 1 - 1e-3]`` for the weight (TRAQ's softmax
  parametrisation restricts the split to about ``[0.27, 0.73] * alpha``);
* the equal split is always evaluated (and given to the GP as a known point),
  and the best of BO and the equal split is returned, so the result is never
  worse than the equal split on the optimisation data.

``gp_minimize`` is used with a fixed ``random_state``; ``gbrt_minimize`` is
broken with current scikit-learn and is not used.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import ConformalError
from .validation import check_alpha

DEFAULT_N_CALLS = 20
_MARGIN = 1e-3


@dataclass(frozen=True)
class BOResult:
    """Outcome of a 1-d Bayesian optimisation against the equal-split baseline.

    Attributes
    ----------
    parameter : str
        ``"alpha_ret"`` or ``"w_ret"`` (or a user name for :func:`minimize_1d`).
    value : float
        The chosen value (BO's best, or the baseline when BO did not beat it).
    objective : float
        Objective at ``value`` (mean set size on the optimisation split).
    baseline : float
        The equal split (``alpha / 2`` or ``0.5``).
    baseline_objective : float
        Objective at the baseline.
    source : {"bo", "equal"}
        Where ``value`` comes from.
    bounds : tuple of float
        The search interval.
    evaluations : tuple of (float, float)
        Every ``(value, objective)`` evaluated, baseline first.
    total : float or None
        ``alpha`` for an alpha split (``None`` for a weight).

    Examples
    --------
    >>> r = BOResult("alpha_ret", 0.03, 2.0, 0.05, 2.5, "bo", (1e-4, 0.0999), (), total=0.1)
    >>> r.alpha_ret, round(r.alpha_gen, 2)
    (0.03, 0.07)
    """

    parameter: str
    value: float
    objective: float
    baseline: float
    baseline_objective: float
    source: str
    bounds: tuple[float, float]
    evaluations: tuple[tuple[float, float], ...]
    total: float | None = None

    @property
    def alpha_ret(self) -> float:
        """The retrieval share of alpha (alpha splits only)."""
        if self.total is None:
            raise ConformalError("This result is not an alpha split.")
        return self.value

    @property
    def alpha_gen(self) -> float:
        """``alpha - alpha_ret`` (alpha splits only)."""
        if self.total is None:
            raise ConformalError("This result is not an alpha split.")
        return self.total - self.value


def _evaluate(objective: Callable[[float], float], x: float) -> float:
    y = float(objective(x))
    if not math.isfinite(y):
        raise ConformalError(
            f"The objective returned {y!r} at {x!r}; it must be finite (for example the mean number of "
            "semantic clusters, counting every candidate when a threshold is +inf)."
        )
    return y


def minimize_1d(
    objective: Callable[[float], float],
    bounds: tuple[float, float],
    baseline: float,
    *,
    n_calls: int = DEFAULT_N_CALLS,
    random_state: int = 0,
    n_initial_points: int | None = None,
    parameter: str = "x",
    total: float | None = None,
) -> BOResult:
    """Minimise a 1-d objective with ``skopt.gp_minimize``, never doing worse than ``baseline``.

    The baseline is evaluated first and passed to the GP as a known point
    (``x0``/``y0``); ``n_calls`` further points are evaluated. Ties go to the
    baseline.

    Parameters
    ----------
    objective : callable
        ``objective(x) -> float``, finite, deterministic.
    bounds : (float, float)
        Search interval, ``low < high``.
    baseline : float
        The reference point (the equal split), inside ``bounds``.
    n_calls : int, default 20
        Number of BO evaluations besides the baseline.
    random_state : int, default 0
        Seed of ``gp_minimize`` (the result is deterministic).
    n_initial_points : int, optional
        Random points before the GP is used (default ``min(5, n_calls)``).

    Returns
    -------
    BOResult

    Examples
    --------
    >>> r = minimize_1d(lambda x: (x - 0.3) ** 2, (0.0, 1.0), 0.5, n_calls=5)
    >>> r.objective <= r.baseline_objective, len(r.evaluations)
    (True, 6)
    """
    low, high = float(bounds[0]), float(bounds[1])
    if not (low < high) or not (low <= baseline <= high):
        raise ConformalError(f"Need low < high and baseline inside the bounds, got {bounds!r} and {baseline!r}.")
    if int(n_calls) < 1:
        raise ConformalError(f"n_calls must be >= 1, got {n_calls!r}.")
    from skopt import gp_minimize
    from skopt.space import Real
    from skopt.utils import cook_estimator

    base_y = _evaluate(objective, float(baseline))
    history: list[tuple[float, float]] = [(float(baseline), base_y)]

    def wrapped(point: Sequence[float]) -> float:
        x = float(point[0])
        y = _evaluate(objective, x)
        history.append((x, y))
        return y

    n_init = min(5, int(n_calls)) if n_initial_points is None else int(n_initial_points)
    space = [Real(low, high, name=parameter)]
    # One L-BFGS start for the GP hyperparameters and a 2000-point sampled acquisition:
    # ample in one dimension and about three times faster than skopt's defaults.
    gp = cook_estimator("GP", space=space, random_state=int(random_state), noise="gaussian", n_restarts_optimizer=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has been evaluated at point.*")
        gp_minimize(
            wrapped,
            space,
            base_estimator=gp,
            n_calls=int(n_calls),
            n_initial_points=n_init,
            x0=[[float(baseline)]],
            y0=[base_y],
            random_state=int(random_state),
            acq_optimizer="sampling",
            n_points=2000,
        )
    best_x, best_y = min(history[1:], key=lambda xy: xy[1], default=(baseline, math.inf))
    if best_y < base_y:
        value, obj, source = best_x, best_y, "bo"
    else:
        value, obj, source = float(baseline), base_y, "equal"
    return BOResult(
        parameter=parameter,
        value=float(value),
        objective=float(obj),
        baseline=float(baseline),
        baseline_objective=base_y,
        source=source,
        bounds=(low, high),
        evaluations=tuple(history),
        total=total,
    )


def optimize_alpha_split(
    objective: Callable[[float, float], float],
    alpha: float,
    *,
    n_calls: int = DEFAULT_N_CALLS,
    random_state: int = 0,
    n_initial_points: int | None = None,
) -> BOResult:
    """Choose ``alpha_ret`` (and ``alpha_gen = alpha - alpha_ret``) by BO over the full range.

    Searches ``[1e-3 * alpha, (1 - 1e-3) * alpha]``, always evaluates the equal
    split ``alpha / 2``, and returns the better of the two (ties: equal split).

    Parameters
    ----------
    objective : callable
        ``objective(alpha_ret, alpha_gen) -> float``: the mean number of semantic
        clusters when thresholds at these levels are computed on the
        optimisation split (never on the calibration split).
    alpha : float
        End-to-end miscoverage (or ``epsilon`` for a PAC split).
    n_calls, random_state, n_initial_points
        As in :func:`minimize_1d`.

    Returns
    -------
    BOResult
        ``result.alpha_ret`` and ``result.alpha_gen`` sum to ``alpha``.

    Examples
    --------
    >>> r = optimize_alpha_split(lambda a_ret, a_gen: abs(a_ret - 0.02), 0.1, n_calls=4)
    >>> r.objective <= r.baseline_objective, round(r.alpha_ret + r.alpha_gen, 12)
    (True, 0.1)
    """
    alpha = check_alpha(alpha)
    bounds = (_MARGIN * alpha, (1.0 - _MARGIN) * alpha)
    return minimize_1d(
        lambda a_ret: objective(a_ret, alpha - a_ret),
        bounds,
        alpha / 2.0,
        n_calls=n_calls,
        random_state=random_state,
        n_initial_points=n_initial_points,
        parameter="alpha_ret",
        total=alpha,
    )


def optimize_hmp_weight(
    objective: Callable[[float], float],
    *,
    n_calls: int = DEFAULT_N_CALLS,
    random_state: int = 0,
    n_initial_points: int | None = None,
) -> BOResult:
    """Choose the HMP retrieval weight ``w_ret`` (``w_gen = 1 - w_ret``) by BO.

    Searches ``[1e-3, 1 - 1e-3]``, always evaluates ``w_ret = 0.5``, and returns
    the better of the two (ties: 0.5).

    Examples
    --------
    >>> r = optimize_hmp_weight(lambda w: abs(w - 0.5), n_calls=3)
    >>> r.value, r.source
    (0.5, 'equal')
    """
    return minimize_1d(
        objective,
        (_MARGIN, 1.0 - _MARGIN),
        0.5,
        n_calls=n_calls,
        random_state=random_state,
        n_initial_points=n_initial_points,
        parameter="w_ret",
    )
