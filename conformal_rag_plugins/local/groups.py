"""Groups for the bundled SQuAD data: one a query carries (question type), one a chunk carries (collection).

Used by the per-group (Mondrian) tests and benchmark to show the two forms a user can apply:

* :func:`question_type` is a function of the query string, known before retrieval, so it
  can be passed as ``group_by=question_type`` to ``calibrate_retriever`` and to the
  retrievers (a per-query group).
* :func:`bundled_collection` is a property of the chunk: the bundled corpus served as five
  collections, one per SQuAD article, with the distractor passages dealt round-robin among
  them (every collection also holds off-topic passages). Stored as chunk metadata, it is the
  ``chunk_group_key`` of a label-conditional calibration.
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
    """The first wh-word of the question (``whom``/``whose`` count as ``who``), else ``"other"``.

    ``why`` questions are too rare in the bundled data for a threshold of their own and count as ``other``.

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
