"""Groups for the bundled SQuAD data, for the per-group (Mondrian) tests and benchmark.

:func:`question_type` is per query (known before retrieval: ``group_by=question_type``);
:func:`bundled_collection` is per chunk (five collections, one per article, distractors dealt
round-robin), stored as chunk metadata for a label-conditional ``chunk_group_key``.
"""

from __future__ import annotations

import re

#: The question types :func:`question_type` returns.
QUESTION_TYPES = ("how", "other", "what", "when", "where", "which", "who")

#: The five SQuAD articles of the bundled subset, sorted.
BUNDLED_ARTICLES = (
    "Computational_complexity_theory",
    "Normans",
    "Sky_(United_Kingdom)",
    "Southern_California",
    "Victoria_(Australia)",
)

_WH = {"what": "what", "who": "who", "whom": "who", "whose": "who", "when": "when", "where": "where"}
_WH |= {"which": "which", "how": "how"}


def question_type(question: str) -> str:
    """The first wh-word (``whom``/``whose`` count as ``who``), else ``"other"``; rare ``why`` is ``other``.

    Examples
    --------
    >>> question_type("In what country is Normandy located?"), question_type("Whose army won?")
    ('what', 'who')
    >>> question_type("Name the king.")
    'other'
    """
    for word in re.findall(r"[a-z]+", question.lower()):
        if word in _WH:
            return _WH[word]
    return "other"


def bundled_collection(chunk_id: str) -> str:
    """The collection of a bundled passage: its article, or for ``distractor-<k>`` the article ``k mod 5``.

    Examples
    --------
    >>> bundled_collection("Normans#3"), bundled_collection("distractor-6")
    ('Normans', 'Normans')
    """
    if chunk_id.startswith("distractor-"):
        return BUNDLED_ARTICLES[int(chunk_id.rsplit("-", 1)[1]) % len(BUNDLED_ARTICLES)]
    return chunk_id.split("#", 1)[0].split("::", 1)[0]
