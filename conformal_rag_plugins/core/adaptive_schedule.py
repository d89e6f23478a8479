"""Geometric context schedule and "no answer" detection for adaptive RAG (Pathway, 2024; stdlib only).

Ask with 1, 2, 4, ... best chunks, growing only when the LLM answers "I don't know". Inside a
conformal set the last round always shows the whole set, so the method never abstains having
seen fewer chunks than the retrieval guarantee needs.
"""

from __future__ import annotations

import math
import numbers
import re

from .errors import ConformalError
from .normalize import ABSTENTION_PHRASES, ABSTENTION_PREFIXES, normalize_answer

# Float slack when rounding initial * factor**k up (10 * 1.1 is 11.000000000000002, not 12).
_ROUND_SLACK = 1e-9


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConformalError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ConformalError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def geometric_schedule(
    n_available: int,
    *,
    initial: int = 1,
    factor: float = 2.0,
    max_rounds: int | None = None,
) -> list[int]:
    """Context sizes (number of top chunks) of each adaptive round.

    Round ``k`` uses ``ceil(initial * factor**k)`` chunks, raised to increase strictly and capped at
    ``n_available``; the last round is always exactly ``n_available`` (it jumps there when
    ``max_rounds`` would stop earlier). The earlier rounds sum to less than
    ``factor / (factor - 1) * n_available`` plus one per round, so cost stays linear in the final size.

    Examples
    --------
    >>> geometric_schedule(10)
    [1, 2, 4, 8, 10]
    >>> geometric_schedule(100, max_rounds=3)
    [1, 2, 100]
    """
    n = _check_int(n_available, "n_available", 0)
    start = _check_int(initial, "initial", 1)
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or not math.isfinite(factor) or factor <= 1:
        raise ConformalError(f"factor must be a finite number > 1, got {factor!r}.")
    limit = None if max_rounds is None else _check_int(max_rounds, "max_rounds", 1)
    if n == 0:
        return []
    sizes: list[int] = []
    k = 0
    while not sizes or sizes[-1] < n:
        if limit is not None and len(sizes) == limit - 1:
            sizes.append(n)  # the last allowed round shows the whole set
            break
        grown = math.ceil(start * float(factor) ** k - _ROUND_SLACK)
        size = min(n, max(grown, sizes[-1] + 1 if sizes else 1))
        sizes.append(size)
        k += 1
    return sizes


# Whole answers (normalised, see ``normalize_answer``) that decline, beyond core.normalize's list.
# "na" is not here: it is also sodium's symbol, so only a written "n/a" or "n.a." counts.
NO_ANSWER_PHRASES: frozenset[str] = (ABSTENTION_PHRASES - {"na"}) | frozenset(
    {
        "none",
        "no answer given",
        "no answer available",
        "not found",
        "not sure",
        "unsure",
        "not in context",
        "not in passage",
        "not in text",
        "not in article",
        "not in articles",
        "not in document",
        "not in documents",
        "not in sources",
        "not in given context",
        "not in provided context",
        "not found in context",
        "not contained in context",
        "no idea",
        "nobody knows",
        "cannot say",
        "can not say",
        "cant say",
        "cannot be found",
        "can not be found",
        "not applicable",
        "no data",
        "no context",
        "information not available",
        "information not provided",
        "information not given",
    }
)

# Normalised prefixes that decline whatever follows (a word boundary must follow the prefix).
NO_ANSWER_PREFIXES: tuple[str, ...] = (
    *ABSTENTION_PREFIXES,
    "i could not find",
    "i couldnt find",
    "i cannot find",
    "i cant find",
    "i can not find",
    "i was unable to find",
    "i was not able to find",
    "could not find answer",
    "couldnt find answer",
    "unable to find answer",
    "unable to answer",
    "unable to determine",
    "i have no idea",
    "i dont have enough information",
    "i do not have enough information",
    "no answer found",
    "not in context",
    "not in passage",
    "not in text",
    "not in provided",
    "not in given",
    "not found in",
    "not contained in",
    "answer is not found",
    "answer cannot be found",
    "answer was not found",
    "it is not in",
    "it is not found",
    "it is not provided",
    "it is not specified",
    "it is not given",
    "cannot be found in",
    "sources do not",
    "articles do not",
    "provided context does not",
    "given context does not",
)

# "N/A", "n.a.", "N / A" written out (before normalisation drops the slash).
_WRITTEN_NA = re.compile(r"^\W*n\s*[/.]\s*a\W*$", re.IGNORECASE)
# Leading words that may precede a refusal ("Answer: I don't know", "Sorry, I don't know").
_LEADING_FILLERS: tuple[str, ...] = (
    "answer",
    "sorry",
    "sorry but",
    "im sorry",
    "im sorry but",
    "i am sorry",
    "i am sorry but",
    "unfortunately",
)


def _declines(norm: str) -> bool:
    if norm in NO_ANSWER_PHRASES:
        return True
    return any(norm == p or norm.startswith(p + " ") for p in NO_ANSWER_PREFIXES)


def is_no_answer(text: str | None) -> bool:
    """Whether an LLM answer declines to answer (the adaptive signal to grow the context).

    On the SQuAD-normalised text, after dropping a leading ``"Answer:"`` or apology: empty or
    ``None``; a whole phrase of :data:`NO_ANSWER_PHRASES`; a clause of :data:`NO_ANSWER_PREFIXES`
    followed by more words; or "N/A" (a bare "Na" is sodium). "No", "none", "unknown" count only as
    the whole answer ("None of the above" is real); a real answer starting with a declining clause
    ("I Don't Know Why", a song) is flagged, the price of catching "I don't know, sorry".

    Examples
    --------
    >>> is_no_answer("The answer is not mentioned in the context"), is_no_answer("None of the Normans")
    (True, False)
    """
    if text is None:
        return True
    if _WRITTEN_NA.match(str(text)):
        return True
    norm = normalize_answer(text)
    if _declines(norm):
        return True
    return any(norm.startswith(f + " ") and _declines(norm[len(f) + 1 :]) for f in _LEADING_FILLERS)
