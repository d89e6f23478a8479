"""SQuAD-style answer normalisation and "no answer" (abstention) detection.

:func:`normalize_answer` is the official SQuAD script's normalisation (lower case; drop
punctuation, incl. typographic quotes, dashes and ellipsis; drop a/an/the; collapse spaces);
every exact-match comparison goes through it, as does :func:`is_abstention`.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable

_PUNCTUATION = frozenset(string.punctuation) | frozenset("‘’“”–—…")  # typographic quotes and dashes too
_DROP_PUNCTUATION = str.maketrans("", "", "".join(sorted(_PUNCTUATION)))
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

_PREFIX_SET = frozenset(ABSTENTION_PREFIXES)
_PREFIXES_AT_WORD_END = tuple(p + " " for p in ABSTENTION_PREFIXES)


def normalize_answer(text: str | None) -> str:
    """Normalise an answer as the SQuAD evaluation script does.

    ``None`` becomes ``""``.

    Examples
    --------
    >>> normalize_answer("I don't know.")
    'i dont know'
    """
    if text is None:
        return ""
    text = str(text)
    # answer sets compare the same short sampled answers many times: those are cached, passages are not
    return _normalized_short(text) if len(text) <= _CACHED_LENGTH else _normalized(text)


def _normalized(text: str) -> str:
    no_punct = text.lower().translate(_DROP_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


_CACHED_LENGTH = 200
_normalized_short = functools.lru_cache(maxsize=1 << 14)(_normalized)


def is_abstention(text: str | None, *, extra_phrases: Iterable[str] = ()) -> bool:
    """Whether an answer declines to answer ("I don't know", "unknown", empty, ...).

    On the normalised text: empty (or ``None``), a whole phrase of :data:`ABSTENTION_PHRASES` or
    ``extra_phrases``, or a prefix of :data:`ABSTENTION_PREFIXES` at a word boundary. Single words
    like "unknown" must be the whole answer ("Unknown Soldier" is real).

    Examples
    --------
    >>> is_abstention("The answer is not mentioned in the context."), is_abstention("Unknown Soldier")
    (True, False)
    """
    norm = normalize_answer(text)
    if norm in ABSTENTION_PHRASES or norm in _PREFIX_SET or norm.startswith(_PREFIXES_AT_WORD_END):
        return True
    return any(norm == normalize_answer(p) for p in extra_phrases)
