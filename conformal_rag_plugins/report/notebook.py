"""Report figures for a notebook, drawn from a saved calibration (needs the ``plots`` extra).

Each function takes a fitted calibration and held-out pools and returns a matplotlib ``Figure``;
``conformal-rag report`` draws the same figures onto its page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..answer_sets.calibration import AnswerSetCalibration
from ..core.pools import PoolObservation
from ..retrieval.calibration import RetrievalCalibration
from .data import DEFAULT_LEVELS, answer_set_summary, coverage_grid, score_distribution, set_size_comparison


def scores_figure(calibration: RetrievalCalibration, observations: Sequence[PoolObservation] | None = None) -> Any:
    """Empirical CDF of the calibration scores, threshold and target marked; ``observations`` adds held-out scores."""
    from .plots import plot_scores

    return plot_scores(score_distribution(calibration, observations))


def coverage_figure(
    calibration: RetrievalCalibration, observations: Sequence[PoolObservation], levels: Sequence[float] | None = None
) -> Any:
    """Held-out coverage on a grid of 1 - alpha with the exact band (see :func:`.data.coverage_grid`)."""
    from .plots import plot_coverage

    return plot_coverage(coverage_grid(calibration, observations, DEFAULT_LEVELS if levels is None else levels))


def set_sizes_figure(calibration: RetrievalCalibration, observations: Sequence[PoolObservation]) -> Any:
    """Held-out set sizes beside fixed top-k and CONFLARE's rule (see :func:`.data.set_size_comparison`)."""
    from .plots import plot_set_sizes

    return plot_set_sizes(set_size_comparison(calibration, observations))


def answer_sets_figure(calibration: AnswerSetCalibration, observations: Sequence[PoolObservation]) -> Any:
    """Coverage ceiling and per-method retrieval set sizes on held-out pools."""
    from .plots import plot_answer_sets

    return plot_answer_sets(answer_set_summary(calibration, observations))
