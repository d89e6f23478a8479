"""``--confidence-level`` (the library's spelling) beside ``--alpha`` on every sub-command that takes it.

One at a time: ``--confidence-level 0.9`` is ``--alpha 0.1``; JSON reports keep ``alpha`` and add
``confidence_level``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from ..core.errors import ConformalError
from ..core.validation import alpha_from_confidence_level

_GIVEN = "_level_flags_given"


def _mark(namespace: argparse.Namespace, option_string: str | None) -> None:
    setattr(namespace, _GIVEN, {*getattr(namespace, _GIVEN, ()), option_string})


class _Given(argparse.Action):
    """An action that also remembers that the option was typed (its default may equal the value given)."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark(namespace, self.option_strings[0])


class GivenStore(_Given, argparse._StoreAction):
    """``store``, remembering that the option was typed."""


class GivenAppend(_Given, argparse._AppendAction):
    """``append``, remembering that the option was typed."""


def alpha_of(level: float) -> float:
    """``1 - level`` as typed in decimal (``0.9`` gives ``0.1``, not ``0.09999999999999998``).

    Examples
    --------
    >>> alpha_of(0.9), alpha_of(0.95)
    (0.1, 0.05)
    """
    return alpha_from_confidence_level(level, "--confidence-level")


def confidence_level_of(alpha: float) -> float:
    """``1 - alpha`` as typed in decimal (inverse of :func:`alpha_of`).

    Examples
    --------
    >>> confidence_level_of(0.1), confidence_level_of(0.05)
    (0.9, 0.95)
    """
    return alpha_from_confidence_level(alpha, "alpha")


def add_confidence_level(parser: argparse.ArgumentParser, *, default: str, repeatable: bool = False) -> None:
    """Add ``--confidence-level`` beside ``--alpha`` (which must use :class:`GivenStore`/``Append``).

    ``default`` is the help's wording of the default.
    """
    parser.add_argument(
        "--confidence-level",
        type=float,
        default=None,
        metavar="LEVEL",
        action=GivenAppend if repeatable else GivenStore,
        help=f"the target coverage 1 - alpha, instead of --alpha (not both): --confidence-level 0.9 is --alpha 0.1"
        f"{' (repeatable)' if repeatable else ''} (default: {default})",
    )


def resolve_level(args: argparse.Namespace, *, alpha_required: bool = False) -> None:
    """Set ``args.alpha`` from ``args.confidence_level`` when given.

    Raises ``ConformalError`` for both spellings, a level outside (0, 1), or (``alpha_required``) neither.

    Examples
    --------
    >>> ns = argparse.Namespace(alpha=0.1, confidence_level=0.8, _level_flags_given={"--confidence-level"})
    >>> resolve_level(ns); ns.alpha
    0.2
    """
    if not hasattr(args, "confidence_level"):
        return
    given = getattr(args, _GIVEN, set())
    if "--alpha" in given and "--confidence-level" in given:
        raise ConformalError(
            "--alpha and --confidence-level are two spellings of one level (--confidence-level 0.9 is --alpha 0.1); "
            "give one of them."
        )
    if "--confidence-level" not in given:
        if alpha_required and args.alpha is None:
            raise ConformalError("give the level as --alpha (target miscoverage) or --confidence-level (1 - alpha).")
        return
    levels = args.confidence_level if isinstance(args.confidence_level, list) else [args.confidence_level]
    for level in levels:
        if not 0.0 < level < 1.0:
            raise ConformalError(f"--confidence-level must be strictly between 0 and 1, got {level}.")
    alphas = [alpha_of(level) for level in levels]
    args.alpha = alphas if isinstance(args.confidence_level, list) else alphas[0]


def with_confidence_levels(rows: Iterable[dict[str, Any]]) -> None:
    """Add ``confidence_level`` after ``alpha`` to every row that has an ``alpha``, in place.

    Examples
    --------
    >>> rows = [{"alpha": 0.1, "method": "split"}, {"method": "oracle"}]
    >>> with_confidence_levels(rows); rows
    [{'alpha': 0.1, 'confidence_level': 0.9, 'method': 'split'}, {'method': 'oracle'}]
    """
    for row in rows:
        if isinstance(row.get("alpha"), int | float) and "confidence_level" not in row:
            items = list(row.items())
            row.clear()
            for key, value in items:
                row[key] = value
                if key == "alpha":
                    row["confidence_level"] = confidence_level_of(value)
