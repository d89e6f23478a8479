"""The report's figures and their numbers, from a calibration and held-out pools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..answer_sets.calibration import AnswerSetCalibration
from ..core.pools import PoolObservation
from ..retrieval.calibration import RetrievalCalibration
from .page import Figure

#: The PNG files a report may write (the last one for an answer-set calibration only).
FIGURE_NAMES = ("coverage.png", "set_sizes.png", "scores.png", "answer_sets.png")


def build_figures(
    retrieval: RetrievalCalibration,
    observations: Sequence[PoolObservation],
    answer_sets: AnswerSetCalibration | None = None,
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures (PNG bytes) and the JSON-ready numbers behind them.

    Keys: ``verdict``, ``tie_levels``, ``coverage``, ``set_sizes``, ``scores`` and, for an answer-set calibration,
    ``answer_sets``.

    For an answer-set calibration everything but ``answer_sets`` is its retrieval stage's (at
    ``alpha_retrieval``, from its stored scores).
    """
    from . import data as report_data
    from . import plots

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
         "Chunks kept per held-out question: the conformal threshold, fixed top-k, and CONFLARE's percentile rule "
         "(cross-fitted on two halves of the held-out questions); each label gives the held-out coverage."),
        (FIGURE_NAMES[2], "Calibration scores: empirical CDF and threshold", plots.plot_scores(scores),
         "Empirical CDF of the calibration nonconformity scores (and the held-out ones) with the threshold and the "
         "target 1 - alpha; a jump is a score many questions share (a tie). Shares are of all questions: the "
         f"{scores.n_misses} calibration misses (gold outside the pool, score +inf) keep the curve below 1."),
    ]  # fmt: skip
    verdict = report_data.grid_verdict(grid, "retrieval-stage " if answer_sets is not None else "").to_dict()
    verdict["text"] += report_data.served_note(stage) + report_data.stale_rule_note(stage)
    numbers: dict[str, Any] = {
        "verdict": verdict,
        "tie_levels": [t.to_dict() for t in report_data.tie_levels(grid)],
        "coverage": grid.to_dict(),
        "set_sizes": sizes.to_dict(),
        "scores": scores.to_dict(),
    }
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
