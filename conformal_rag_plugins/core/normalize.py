"""SQuAD-style answer normalisation and "no answer" (abstention) detection.

:func:`normalize_answer` is the normalisation of the official SQuAD evaluation
script: lower case, drop punctuation (ASCII, plus typographic quotes, dashes
and ellipsis), drop the articles *a*, *an*, *the*, and collapse white space.
Every exact-match comparison in the library goes through it.

:func:`is_abstention` says whether an answer declines to answer ("I don't
know.", "Unknown", "The context does not say", an empty string, ...). It
compares *normalised* text, never raw strings, so "I don't know." and
"i dont know" are both abstentions.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

_PUNCTUATION = frozenset(string.punctuation) | frozenset("‘’“”–—…")  # typographic quotes and dashes too
_ARTICLES = re.compile(r"\b(a|an|the)\b")

# Whole answers (after normalisation) that decline to answer.
ABSTENTION_PHRASES: frozenset[str] = frozenset(
    {
        "",
        "i dont know",
        "i do not know",
        "dont know",
        "do not know",
        "idk",
        "unknown",
        "no answer",
        "no answer found",
        "none found",
        "not known",
        "unanswerable",
        "not answerable",
        "cannot answer",
        "can not answer",
        "cant answer",
        "cannot be answered",
        "cannot be determined",
        "can not be determined",
        "cant be determined",
        "cannot determine",
        "not determinable",
        "undetermined",
        "not mentioned",
        "not stated",
        "not specified",
        "not given",
        "not provided",
        "not available",
        "no information",
        "not enough information",
        "insufficient information",
        "no relevant information",
        "n a",
        "na",
    }
)

# Normalised prefixes that decline to answer whatever follows
# ("i dont know who wrote it", "not mentioned in context", ...).
ABSTENTION_PREFIXES: tuple[str, ...] = (
    "i dont know",
    "i do not know",
    "i am not sure",
    "im not sure",
    "i cannot answer",
    "i cant answer",
    "i am unable to",
    "im unable to",
    "no answer",
    "unanswerable",
    "cannot be determined",
    "can not be determined",
    "cannot be answered",
    "not mentioned",
    "not stated",
    "not specified",
    "not provided",
    "not enough information",
    "insufficient information",
    "there is no information",
    "no information",
    "it is not mentioned",
    "it is not stated",
    "it is unknown",
    "it cannot be determined",
    "it can not be determined",
    "it cannot be answered",
    "this cannot be determined",
    "cannot be inferred",
    "cannot tell",
    "i cannot tell",
    "i cant tell",
    "answer is not mentioned",
    "answer is not stated",
    "answer is not specified",
    "answer is not provided",
    "answer is not given",
    "answer is not in",
    "answer is not available",
    "answer is unknown",
    "answer cannot be determined",
    "answer can not be determined",
    "this is not mentioned",
    "that is not mentioned",
    "information is not",
    "context does not",
    "passage does not",
    "text does not",
    "document does not",
    "context doesnt",
    "passage doesnt",
    "text doesnt",
    "document doesnt",
)


def normalize_answer(text: str | None) -> str:
    """Normalise an answer as the SQuAD evaluation script does.

    Lower case, remove punctuation, remove the articles a/an/the, and
    collapse white space. ``None`` becomes ``""``.

    Parameters
    ----------
    text : str or None
        A raw answer.

    Returns
    -------
    str
        The normalised answer.

    Examples
    --------
    >>> normalize_answer("  The Eiffel   Tower! ")
    'eiffel tower'
    >>> normalize_answer("I don't know.")
    'i dont know'
    """
    if text is None:
        return ""
    lowered = str(text).lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    no_articles = _ARTICLES.sub(" ", no_punct)
    return " ".join(no_articles.split())


def is_abstention(text: str | None, *, extra_phrases: Iterable[str] = ()) -> bool:
    """Whether an answer declines to answer ("I don't know", "unknown", empty, ...).

    The test runs on the normalised text: it is an abstention when it is
    empty, equals one of :data:`ABSTENTION_PHRASES` (or ``extra_phrases``,
    normalised), or starts with one of :data:`ABSTENTION_PREFIXES` followed
    by a word boundary. Answers such as "Unknown Soldier" are *not*
    abstentions: single words like "unknown" must be the whole answer.

    Parameters
    ----------
    text : str or None
        A raw answer. ``None`` (a failed sample) counts as an abstention.
    extra_phrases : iterable of str, optional
        More whole-answer phrases to treat as abstentions.

    Returns
    -------
    bool

    Examples
    --------
    >>> is_abstention("I don't know.")
    True
    >>> is_abstention("The answer is not mentioned in the context.")
    True
    >>> is_abstention("Not mentioned in the context")
    True
    >>> is_abstention("Unknown Soldier")
    False
    >>> is_abstention("")
    True
    """
    norm = normalize_answer(text)
    if norm in ABSTENTION_PHRASES:
        return True
    if any(norm == normalize_answer(p) for p in extra_phrases):
        return True
    return any(norm == p or norm.startswith(p + " ") for p in ABSTENTION_PREFIXES)
