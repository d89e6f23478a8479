"""Bayesian optimisation of the combination's free parameter (alpha split or HMP weight; TRAQ, TRAC).

Every rule is valid for any fixed split, so the split is chosen (``skopt.gp_minimize``, fixed
``random_state``) to minimise the mean set size on an optimisation split disjoint from the
calibration split. Unlike TRAQ's code (whose softmax keeps the split in about
``[0.27, 0.73] * alpha``) the search covers the full open interval, and the equal split is always
evaluated and returned when BO does not beat it. ``gbrt_minimize`` is broken with current
scikit-learn and is not used.
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

    ``source`` is ``"bo"`` or ``"equal"`` (the baseline won); ``evaluations`` lists every
    ``(value, objective)``, baseline first; ``total`` is ``alpha`` for a split, ``None`` for a weight.

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

    The baseline is evaluated first and given to the GP as a known point; ``n_calls`` further
    points follow (``n_initial_points`` random ones, default ``min(5, n_calls)``). Ties go to the
    baseline.

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
    bounds: tuple[float, float] | None = None,
) -> BOResult:
    """Choose ``alpha_ret`` (and ``alpha_gen = alpha - alpha_ret``) by BO over the full range.

    Searches ``[1e-3 * alpha, (1 - 1e-3) * alpha]`` (``alpha`` may be a PAC ``epsilon``), or the
    narrower ``bounds`` inside it (the splits a stage's miss bound allows), and never does worse than
    ``alpha / 2`` (the middle of ``bounds`` when ``alpha / 2`` lies outside them).
    ``objective(alpha_ret, alpha_gen)`` must be computed on the optimisation split, never on the
    calibration split.

    Examples
    --------
    >>> r = optimize_alpha_split(lambda a_ret, a_gen: abs(a_ret - 0.02), 0.1, n_calls=4)
    >>> r.objective <= r.baseline_objective, round(r.alpha_ret + r.alpha_gen, 12)
    (True, 0.1)
    """
    alpha = check_alpha(alpha)
    full = (_MARGIN * alpha, (1.0 - _MARGIN) * alpha)
    low, high = full if bounds is None else (max(full[0], float(bounds[0])), min(full[1], float(bounds[1])))
    if not low < high:
        raise ConformalError(
            f"No alpha_ret in {bounds!r} lies inside (0, alpha = {alpha:g}) with room for the other stage: no split "
            "to search."
        )
    baseline = alpha / 2.0 if low <= alpha / 2.0 <= high else (low + high) / 2.0
    return minimize_1d(
        lambda a_ret: objective(a_ret, alpha - a_ret),
        (low, high),
        baseline,
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

    Searches ``[1e-3, 1 - 1e-3]`` and never does worse than ``0.5`` (ties: 0.5).

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
