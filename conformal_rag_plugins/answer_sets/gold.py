"""Which chunk and which answers a calibration question is scored against (both stages alike)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import CalibrationError
from ..datasets.examples import CalibrationExample
from ..retrieval.gold_matching import gold_positions
from .prompts import IDK


@dataclass(frozen=True)
class GoldChunk:
    """The gold chunk that defines a question's retrieval score: its id (if known) and text."""

    chunk_id: str | None
    text: str


def defining_gold(example: CalibrationExample, pool: Any, texts: Callable[[list[str]], dict[str, str]]) -> GoldChunk:
    """The best-ranked gold chunk of ``example`` in ``pool``, else its first gold chunk.

    The retrieval score is that of the best-ranked gold chunk, so the generator is calibrated on it
    and both stages score the same pair.

    >>> from types import SimpleNamespace
    >>> ex = CalibrationExample("q", gold_ids=("a", "b"))
    >>> pool = SimpleNamespace(ids=("x", "b", "a"), texts=("X", "B", "A"))
    >>> defining_gold(ex, pool, lambda ids: {})
    GoldChunk(chunk_id='b', text='B')
    >>> defining_gold(ex, SimpleNamespace(ids=("x",), texts=("X",)), lambda ids: {"a": "A"})
    GoldChunk(chunk_id='a', text='A')
    """
    positions = gold_positions(example, pool.ids, pool.texts)
    if positions:
        first = positions[0]
        return GoldChunk(pool.ids[first], pool.texts[first])
    if example.gold_ids:
        gid = example.gold_ids[0]
        found = texts([gid]).get(gid)
        if found is None:
            raise CalibrationError(f"No text found for the gold chunk {gid!r} of {example.question!r}.")
        return GoldChunk(gid, found)
    if example.gold_texts:
        return GoldChunk(None, example.gold_texts[0])
    raise CalibrationError(f"{example.question!r} has neither gold ids nor gold texts.")


def references_of(example: CalibrationExample) -> tuple[str, ...]:
    """Reference answers; an unanswerable question's reference is the abstention."""
    if example.is_impossible:
        return (IDK,)
    if not example.answers:
        raise CalibrationError(
            f"{example.question!r} has no reference answers; the generator stage needs them (mark "
            "unanswerable questions is_impossible=True, whose correct answer is an abstention)."
        )
    return tuple(example.answers)
