"""Figures of a calibration (optional ``plots`` extra): each ``plot_*`` draws numbers from :mod:`.data`.

Figures are on the non-interactive Agg canvas (no ``pyplot`` state: scripts, servers and
notebooks alike); :func:`figure_png` gives PNG bytes.
"""

from __future__ import annotations

import io
import math
from typing import Any

from ..core.errors import ConformalError
from .data import AnswerSetSummary, CoverageGrid, ScoreDistribution, SetSizeComparison


def new_figure(width: float = 7.0, height: float = 4.2) -> Any:
    """An empty matplotlib ``Figure`` on an Agg canvas (without matplotlib: ConformalError naming the extra)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - exercised by a test that hides matplotlib
        raise ConformalError(
            "Plots need matplotlib, from the optional 'plots' extra: pip install 'conformal-rag-plugins[plots]'."
        ) from exc
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig: Any) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_coverage(grid: CoverageGrid) -> Any:
    """Held-out coverage against the target 1 - alpha, with the exact split-conformal 95% band."""
    fig = new_figure()
    ax = fig.add_subplot()
    levels = list(grid.levels)
    finite = [i for i, lo in enumerate(grid.band_low) if not math.isnan(lo)]
    if finite:
        ax.fill_between(
            [levels[i] for i in finite],
            [grid.band_low[i] for i in finite],
            [grid.band_high[i] for i in finite],
            color="tab:blue",
            alpha=0.2,
            step=None,
            label="95% band: Beta-Binomial (exact split conformal; ties only raise coverage)",
        )
    ax.plot(levels, levels, color="black", linestyle="--", linewidth=1, label="target 1 - alpha")
    ax.plot(levels, grid.coverage, marker="o", color="tab:blue", label=f"held-out coverage (n_test={grid.n_test})")
    infinite = [i for i in range(len(levels)) if i not in finite]
    if infinite:
        ax.plot(
            [levels[i] for i in infinite],
            [grid.coverage[i] for i in infinite],
            "x",
            color="tab:red",
            label="threshold +inf (whole pool kept)",
        )
    ax.axvline(
        grid.calibrated_level, color="tab:green", linewidth=1, label=f"calibrated 1 - alpha = {grid.calibrated_level:g}"
    )
    ax.set_xlabel("target coverage 1 - alpha")
    ax.set_ylabel("held-out coverage")
    ax.set_title(f"Coverage vs target ({grid.family} score, n_calibration={grid.n_calibration})")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def plot_set_sizes(comparison: SetSizeComparison) -> Any:
    """Set sizes of the conformal threshold beside fixed top-k and CONFLARE's rule.

    Left: conformal and CONFLARE histograms, top-k as lines; right: every rule's mean size and coverage.
    """
    fig = new_figure(9.5, 4.5)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    largest = max(max(m.sizes) for m in comparison.methods.values())
    bins = [b - 0.5 for b in range(0, largest + 2)]
    colours = {"conformal": "tab:blue", "conflare": "tab:orange"}
    for name, colour in colours.items():
        m = comparison.methods.get(name)
        if m is not None:
            left.hist(m.sizes, bins=bins, histtype="stepfilled" if name == "conformal" else "step", alpha=0.6,
                      color=colour, linewidth=1.5, label=f"{m.label}: coverage {m.coverage:.3f}")  # fmt: skip
    for i, m in enumerate(m for n, m in comparison.methods.items() if n.startswith("topk@")):
        left.axvline(m.mean_size, color="grey", linestyle="--", linewidth=1)
        text = f" {m.label}\n cov {m.coverage:.2f}"
        left.text(m.mean_size, 0.98 - 0.1 * i, text, transform=left.get_xaxis_transform(), va="top", fontsize=7)
    left.set_xlabel(f"set size (chunks kept of the pool of {comparison.pool_size})")
    left.set_ylabel("held-out questions")
    left.legend(fontsize=7, loc="center right")
    names = list(comparison.methods)
    means = [comparison.methods[n].mean_size for n in names]
    bars = right.barh(range(len(names)), means, color=[colours.get(n, "grey") for n in names], alpha=0.7)
    right.set_yticks(range(len(names)))
    right.set_yticklabels([comparison.methods[n].label for n in names], fontsize=8)
    for bar, n in zip(bars, names, strict=True):
        right.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" cov {comparison.methods[n].coverage:.3f}",
                   va="center", fontsize=7)  # fmt: skip
    right.set_xlim(0, max(means) * 1.45 if max(means) > 0 else 1)
    right.set_xlabel("mean set size")
    fig.suptitle(f"Set sizes at 1 - alpha = {comparison.level:g} on held-out questions", fontsize=11)
    return fig


def _ecdf(scores: tuple[float, ...], total: int) -> tuple[list[float], list[float]]:
    """Steps of the empirical CDF of ``scores`` over ``total`` questions (misses, +inf, never reached)."""
    xs = sorted(scores)
    return xs, [(i + 1) / total for i in range(len(xs))]


def plot_scores(distribution: ScoreDistribution) -> Any:
    """Empirical CDF of the calibration (and held-out) scores, with the threshold and the target.

    An ECDF, so a shared score (``relative``: gold ranked first scores 0) is a jump, not a spike.
    Shares are over every question, so the curve ends below 1 by the misses' share (``+inf``);
    the threshold is where it first reaches the rank ``ceil((n+1)(1-alpha)) / n``.
    """
    fig = new_figure()
    ax = fig.add_subplot()
    n = distribution.n_calibration
    n_held = len(distribution.heldout_scores) + distribution.heldout_misses
    both = list(distribution.scores) + list(distribution.heldout_scores)
    lo, hi = (min(both), max(both)) if both else (0.0, 1.0)
    pad = (hi - lo) * 0.03 or 0.5
    q = distribution.threshold
    right = max(hi, q) + pad if math.isfinite(q) else hi + pad
    held = f"held-out (n={n_held}, misses: {distribution.heldout_misses})"
    curves = (
        (distribution.scores, n, "tab:blue", f"calibration (n={n}, misses: {distribution.n_misses})"),
        (distribution.heldout_scores, n_held, "tab:orange", held),
    )
    for scores, total, colour, label in curves:
        if scores and total:
            xs, ys = _ecdf(scores, total)
            ax.step([lo - pad, *xs, right], [0.0, *ys, ys[-1]], where="post", color=colour, linewidth=1.5, label=label)
    target = 1.0 - distribution.alpha
    ax.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target 1 - alpha = {target:g}")
    if math.isfinite(q):
        ax.axvline(q, color="tab:red", linewidth=1.5, label=f"threshold q = {q:.4g}")
        where = f"{distribution.n_above} of {n} calibration scores above q (misses included)"
    else:
        where = "threshold +inf: every candidate is kept"
    ax.text(0.99, 0.03, where, transform=ax.transAxes, ha="right", va="bottom", fontsize=8)
    ax.set_xlim(lo - pad, right)
    ax.set_ylim(0.0, 1.02)
    ax.set_title(
        f"Empirical CDF of the calibration scores ({distribution.family}, alpha={distribution.alpha:g})", fontsize=10
    )
    ax.set_xlabel("nonconformity score (lower conforms better; a miss scores +inf and is never reached)")
    ax.set_ylabel("share of questions with score <= x")
    ax.legend(loc="center right", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def plot_answer_sets(summary: AnswerSetSummary) -> Any:
    """The generator's coverage ceiling against its target, and retrieval set sizes per method."""
    fig = new_figure(9.0, 4.2)
    left, right = fig.subplots(1, 2, width_ratios=[1, 2])
    left.bar(["coverage ceiling"], [summary.coverage_ceiling], color="tab:purple", alpha=0.7)
    left.axhline(summary.generator_target, color="black", linestyle="--",
                 label=f"generator target 1 - alpha_gen = {summary.generator_target:.3g}")  # fmt: skip
    left.set_ylim(0, 1.05)
    left.set_title(f"Generator ({summary.n_generator_misses} of {summary.n_calibration} never right)", fontsize=9)
    left.legend(fontsize=7, loc="lower center")
    ok = [n for n, m in summary.methods.items() if "sizes" in m]
    if ok:
        right.boxplot([list(summary.methods[n]["sizes"]) for n in ok], showmeans=True)
        right.set_xticks(range(1, len(ok) + 1))
        right.set_xticklabels(
            [
                f"{n}{' *' if n == summary.calibrated_method else ''}\n"
                f"retrieval cov {summary.methods[n]['coverage']:.2f}"
                f"{'' if summary.methods[n]['guaranteed'] else ' (no guarantee)'}"
                for n in ok
            ],
            fontsize=8,
        )
    right.set_ylabel("retrieval set size (chunks to the generator)")
    right.set_title(f"Per method at alpha={summary.alpha:g} (* = calibrated)", fontsize=9)
    right.grid(alpha=0.3, axis="y")
    return fig
