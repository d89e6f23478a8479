"""The parts of the ``evaluate`` report about units, pool sizes and context tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.config_search import evaluate_fixed_settings
from ..core.pool_misses import pool_miss_advice
from ..core.pools import PoolObservation
from ..core.splits import RandomSplits
from .unit_candidates import Candidates


def describe_choice(choice: str, settings: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Split a ``"key|family"`` choice into its unit, fusion, pool size and family.

    Examples
    --------
    >>> describe_choice("document/minmax:0.3|relative", {"document/minmax:0.3": {"unit": "document",
    ...     "fusion": "minmax:0.3", "pool_size": 50}})
    {'unit': 'document', 'fusion': 'minmax:0.3', 'pool_size': 50, 'family': 'relative'}
    """
    key, _, family = choice.rpartition("|")
    return dict(settings[key]) | {"family": family}


def mean_unit_tokens(candidates: Candidates) -> dict[str, float]:
    """Mean MiniLM tokens of a returned unit, per unit (over every pool of the base setting)."""
    out: dict[str, float] = {}
    for key, obs in candidates.observations.items():
        unit = candidates.settings[key]["unit"]
        if unit in out or not obs or obs[0].costs is None:
            continue
        costs = [c for o in obs for c in o.costs.tolist()]  # type: ignore[union-attr]
        out[unit] = round(sum(costs) / max(1, len(costs)), 1)
    return out


def fixed_settings_block(
    observations: Mapping[str, Sequence[PoolObservation]],
    alphas: Sequence[float],
    *,
    families: Sequence[str],
    trials: int,
    seed: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every fixed ``setting|family`` over the trials, and the best one in hindsight (fewest context tokens)."""
    block: dict[str, Any] = {}
    best: dict[str, Any] = {}
    for alpha in alphas:
        summaries = evaluate_fixed_settings(
            observations, alpha, families=families, splits=RandomSplits(trials=trials, seed=seed)
        )
        rows = {
            k: {
                key: row[key]
                for key in ("mean_coverage", "std_coverage", "mean_set_size", "mean_context_tokens")
                if key in row
            }
            for k, row in ((k, s.as_row()) for k, s in summaries.items())
        }
        block[f"{alpha:g}"] = rows
        ranked = sorted(rows, key=lambda k: (rows[k]["mean_context_tokens"] or 0.0, rows[k]["mean_set_size"]))
        if ranked:
            best[f"{alpha:g}"] = {"setting": ranked[0]} | rows[ranked[0]]
    return block, best


def pool_miss_notes(candidates: Candidates, base_key: str, alphas: Sequence[float]) -> list[str]:
    """The pool-miss warning of the base setting at the smallest alpha (empty when misses are few)."""
    settings = candidates.settings[base_key]
    same = {
        int(s["pool_size"]): candidates.observations[k]
        for k, s in candidates.settings.items()
        if s["unit"] == settings["unit"] and s["fusion"] == settings["fusion"]
    }
    shares = {p: sum(1 for o in obs if not o.gold_positions) / max(1, len(obs)) for p, obs in same.items()}
    base = candidates.observations[base_key]
    misses = sum(1 for o in base if not o.gold_positions)
    advice = pool_miss_advice(misses, len(base), min(alphas), int(settings["pool_size"]), shares)
    return [advice] if advice else []
