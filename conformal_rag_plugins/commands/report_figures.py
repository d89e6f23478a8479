"""The report's figures and their numbers, from a calibration and held-out pools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..calibration.answer_sets import AnswerSetCalibration
from ..calibration.retrieval import RetrievalCalibration
from ..core.retrieval_trials import PoolObservation
from .report_page import Figure

__all__ = ["FIGURE_NAMES", "build_figures"]

#: The PNG files a report may write (the last one for an answer-set calibration only).
FIGURE_NAMES = ("coverage.png", "set_sizes.png", "scores.png", "answer_sets.png")


def build_figures(
    retrieval: RetrievalCalibration,
    observations: Sequence[PoolObservation],
    answer_sets: AnswerSetCalibration | None = None,
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures (PNG bytes) and the JSON-ready numbers behind them (keys ``coverage``, ``set_sizes``,
    ``scores`` and, for an answer-set calibration, ``answer_sets``).

    For an answer-set calibration the set-size and score figures are those of its retrieval
    stage at ``alpha_retrieval``; the coverage grid uses the retrieval stage's stored scores.

    Examples
    --------
    >>> figures, numbers = build_figures(cal, heldout_observations)  # doctest: +SKIP
    """
    from ..calibration import plots, report_data

    stage = answer_sets.retrieval_stage() if answer_sets is not None else retrieval
    grid = report_data.coverage_grid(stage, observations)
    sizes = report_data.set_size_comparison(stage, observations)
    scores = report_data.score_distribution(stage, observations)
    band = "shaded: central 95% of Beta-Binomial(n_test, k, n+1-k)/n_test, the exact law of split-conformal coverage"
    drawn = [
        (FIGURE_NAMES[0], "Coverage against target", plots.plot_coverage(grid),
         f"Held-out coverage of the threshold computed from the {grid.n_calibration} stored calibration scores at "
         f"each 1 - alpha; {band}."),
        (FIGURE_NAMES[1], "Set sizes at the calibrated level", plots.plot_set_sizes(sizes),
         "Chunks kept per held-out question: the conformal threshold, fixed top-k, and ConFLARE's percentile rule "
         "(cross-fitted on two halves of the held-out questions); each label gives the held-out coverage."),
        (FIGURE_NAMES[2], "Calibration scores and threshold", plots.plot_scores(scores),
         f"Calibration nonconformity scores with the threshold; {scores.n_misses} misses (gold outside the pool, "
         "score +inf) counted, not drawn."),
    ]  # fmt: skip
    numbers: dict[str, Any] = {"coverage": grid.to_dict(), "set_sizes": sizes.to_dict(), "scores": scores.to_dict()}
    if answer_sets is not None:
        summary = report_data.answer_set_summary(answer_sets, observations)
        numbers["answer_sets"] = summary.to_dict()
        drawn.append(
            (FIGURE_NAMES[3], "Answer sets: generator ceiling and methods", plots.plot_answer_sets(summary),
             "Left: share of calibration questions where some sampled answer was right, against the generator's "
             "target. Right: retrieval sets (chunks given to the generator) per combination method.")
        )  # fmt: skip
    figures = [Figure(name, title, caption, plots.figure_png(fig)) for name, title, fig, caption in drawn]
    return figures, numbers
