"""Quality filters for LLM-generated calibration questions (dependency-free heuristics).

Checks in order; the first failure is the rejection reason: ``not_json``, ``empty_question``,
``wrong_language`` (:func:`looks_wrong_language`), ``copies_chunk`` (:func:`copies_chunk`),
``answer_not_in_chunk`` (normalised, word-aligned). ``duplicate`` is found by the generation loop.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.normalize import normalize_answer
from ..runtime.json_output import parse_json_object
from .chunk_labels import answer_in_text

REASON_LLM_ERROR = "llm_error"
REASON_NOT_JSON = "not_json"
REASON_EMPTY = "empty_question"
REASON_LANGUAGE = "wrong_language"
REASON_COPY = "copies_chunk"
REASON_ANSWER = "answer_not_in_chunk"
REASON_DUPLICATE = "duplicate"
#: Every rejection reason, in the order the checks run.
REASONS = (
    REASON_LLM_ERROR,
    REASON_NOT_JSON,
    REASON_EMPTY,
    REASON_LANGUAGE,
    REASON_COPY,
    REASON_ANSWER,
    REASON_DUPLICATE,
)

#: A question sharing this many consecutive normalised words with its chunk copies it.
COPY_RUN_WORDS = 10
#: A question of this many words found whole in its chunk copies it (shorter ones only without "?").
COPY_MIN_WORDS = 6

#: Common English function and question words ("a" is left out: it is also French and Spanish).
_ENGLISH_WORDS_TEXT = (
    "the an of in on at to for by with from and or is are was were be been being did does do has have had "
    "what who whom whose which when where why how that this these those it its as into many much not"
)
ENGLISH_FUNCTION_WORDS = frozenset(_ENGLISH_WORDS_TEXT.split())
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_ENGLISH_SHARE = 0.15
_SCRIPT_GAP = 0.5


def ascii_letter_share(text: str) -> float | None:
    """Share of ASCII letters among the letters of ``text`` (``None`` without letters).

    >>> ascii_letter_share("Rollo, 911!"), ascii_letter_share("诺曼人") , ascii_letter_share("123") is None
    (1.0, 0.0, True)
    """
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    return sum(c.isascii() for c in letters) / len(letters)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def looks_wrong_language(question: str, chunk_text: str) -> bool:
    """Whether the question seems written in another language than the chunk.

    Another script (ASCII-letter shares differ by more than 0.5), or an English chunk (>= 15% common
    function words) and a question of 3+ words with none. It cannot tell apart two non-English
    languages in the same script.

    >>> chunk = "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy."
    >>> looks_wrong_language("Who gave their name to Normandy?", chunk)
    False
    >>> looks_wrong_language("Quel peuple donna son nom à la Normandie ?", chunk)
    True
    >>> looks_wrong_language("诺曼人把名字给了哪个地区？", chunk)
    True
    """
    q_share, c_share = ascii_letter_share(question), ascii_letter_share(chunk_text)
    if q_share is not None and c_share is not None and abs(q_share - c_share) > _SCRIPT_GAP:
        return True
    chunk_words = _words(chunk_text)
    if len(chunk_words) < 8:
        return False
    english = sum(w in ENGLISH_FUNCTION_WORDS for w in chunk_words) / len(chunk_words)
    q_words = _words(question)
    return english >= _ENGLISH_SHARE and len(q_words) >= 3 and not any(w in ENGLISH_FUNCTION_WORDS for w in q_words)


def copies_chunk(question: str, chunk_text: str, *, run_words: int = COPY_RUN_WORDS) -> bool:
    """Whether the question is a sentence lifted from the chunk rather than a question about it.

    Yes if the normalised question is a word-aligned substring of the chunk and has at least
    :data:`COPY_MIN_WORDS` words or no "?", or they share :data:`COPY_RUN_WORDS` consecutive words.
    A short real question inside the chunk ("Who founded the duchy?") is kept.

    >>> chunk = "Rollo agreed to defend the lower Seine valley against other Viking raiders in 911."
    >>> copies_chunk("Rollo agreed to defend the lower Seine valley?", chunk)
    True
    >>> copies_chunk("What did Rollo agree to defend?", chunk)
    False
    >>> copies_chunk("Who agreed to defend?", "The man who agreed to defend the valley."), copies_chunk("Rollo", chunk)
    (False, True)
    """
    q = normalize_answer(question).split()
    c = normalize_answer(chunk_text).split()
    if not q:
        return False
    inside = f" {' '.join(q)} " in f" {' '.join(c)} "
    if inside and (len(q) >= COPY_MIN_WORDS or not question.rstrip().endswith("?")):
        return True
    if len(q) < run_words:
        return False
    grams = {tuple(c[i : i + run_words]) for i in range(len(c) - run_words + 1)}
    return any(tuple(q[i : i + run_words]) in grams for i in range(len(q) - run_words + 1))


def check_generated(output: str | None, chunk_text: str) -> tuple[str | None, dict[str, Any] | None]:
    """Check one LLM output against its chunk: ``(first failing reason or None, stripped record or None)``.

    >>> chunk = "Rollo agreed to defend the lower Seine valley in 911."
    >>> check_generated('{"question": "When did Rollo agree?", "answer": "911"}', chunk)
    (None, {'question': 'When did Rollo agree?', 'answer': '911'})
    >>> check_generated('{"question": "When did Rollo agree?", "answer": "912"}', chunk)[0]
    'answer_not_in_chunk'
    >>> check_generated(None, chunk)[0], check_generated("nothing", chunk)[0]
    ('llm_error', 'not_json')
    """
    if output is None:
        return REASON_LLM_ERROR, None
    obj = parse_json_object(output)
    if obj is None:
        return REASON_NOT_JSON, None
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        return REASON_EMPTY, None
    question = " ".join(question.split())
    if looks_wrong_language(question, chunk_text):
        return REASON_LANGUAGE, None
    if copies_chunk(question, chunk_text):
        return REASON_COPY, None
    answer = obj.get("answer")
    answer = " ".join(str(answer).split()) if isinstance(answer, (str, int, float)) else ""
    if not answer or not answer_in_text([answer], chunk_text):
        return REASON_ANSWER, None
    return None, {"question": question, "answer": answer}
