"""The ``groups`` block of ``conformal-rag evaluate --group-by FIELD``: pooled vs per-group thresholds per group."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import ConformalError, InputFileError
from ..core.mondrian import check_group_label
from ..core.pools import PoolObservation
from ..core.splits import RandomSplits
from ..datasets.examples import CalibrationExample
from ..evaluation.mondrian_trials import simulate_group_splits


def question_groups(questions: Sequence[CalibrationExample], field: str, qa_name: str | Path) -> list[str]:
    """The ``field`` of every qa line (kept in ``metadata`` by ``load_qa``), as a group label.

    Raises :class:`InputFileError` naming a question without the field, or with an empty or
    non-string value.

    Examples
    --------
    >>> question_groups([CalibrationExample("q", gold_ids=("a",), metadata={"t": "x"})], "t", "qa.jsonl")
    ['x']
    """
    out = []
    for ex in questions:
        if field not in ex.metadata:
            raise InputFileError(
                f"{qa_name}: the question {ex.question!r} has no field {field!r} to group by; give every qa line "
                f"a {field!r} (a collection or tenant known at query time)."
            )
        try:
            out.append(check_group_label(ex.metadata[field], f" (field {field!r} of the question {ex.question!r})"))
        except ConformalError as exc:
            raise InputFileError(f"{qa_name}: {exc}") from None
    return out


def groups_block(
    observations: Sequence[PoolObservation],
    labels: Sequence[str],
    alphas: Sequence[float],
    *,
    score: str,
    trials: int,
    seed: int,
    group_by: str,
) -> dict[str, Any]:
    """Per alpha and group: size, and coverage/mean set size under the pooled and the per-group threshold.

    Same seeded splits as the ``split`` rows; ``auto`` uses ``relative`` so only the threshold differs.
    """
    family = "relative" if score == "auto" else score
    results: dict[str, Any] = {}
    for alpha in alphas:
        sim = simulate_group_splits(
            observations, labels, alpha, family=family, splits=RandomSplits(trials=trials, seed=seed)
        )
        per = sim.report()
        results[f"{alpha:g}"] = {
            "groups": per,
            "worst_group_coverage": {
                rule: min(float(v[rule]["mean_coverage"]) for v in per.values())  # type: ignore[index]
                for rule in ("pooled", "per_group")
            },
        }
    return {"field": group_by, "score_family": family, "trials": trials, "by_alpha": results}
