"""Plain-text and markdown tables for the CLI and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Render rows as a GitHub markdown table.

    Examples
    --------
    >>> print(markdown_table([{"a": 1, "b": 0.5}], ["a", "b"]))
    | a | b |
    |---|---|
    | 1 | 0.500 |
    """
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
