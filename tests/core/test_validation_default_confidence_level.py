"""One default confidence level, said once (``DEFAULT_CONFIDENCE_LEVEL``) and used by every entry point."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import conformal_rag_plugins
from conformal_rag_plugins import AnswerSetConformalizer, RetrievalConformalizer, RetrievalOptions
from conformal_rag_plugins.core.validation import DEFAULT_CONFIDENCE_LEVEL
from conformal_rag_plugins.langchain import calibrate_answer_sets as langchain_answer_sets
from conformal_rag_plugins.llamaindex import calibrate_answer_sets as llamaindex_answer_sets
from conformal_rag_plugins.retrieval import options as retrieval_options

PACKAGE = Path(conformal_rag_plugins.__file__).parent


def _default(function: object) -> object:
    return inspect.signature(function).parameters["confidence_level"].default  # type: ignore[arg-type]


def test_the_library_default_is_ninety_percent() -> None:
    assert DEFAULT_CONFIDENCE_LEVEL == 0.9
    assert retrieval_options.DEFAULT_CONFIDENCE_LEVEL is DEFAULT_CONFIDENCE_LEVEL  # the old import path still works


def test_answer_sets_and_retrieval_share_the_default() -> None:
    defaults = {
        "llamaindex.calibrate_answer_sets": _default(llamaindex_answer_sets),
        "langchain.calibrate_answer_sets": _default(langchain_answer_sets),
        "AnswerSetConformalizer": _default(AnswerSetConformalizer.__init__),
        "RetrievalConformalizer": _default(RetrievalConformalizer.__init__),
        "RetrievalOptions": RetrievalOptions().confidence_level,
    }
    assert defaults == dict.fromkeys(defaults, DEFAULT_CONFIDENCE_LEVEL)
    assert AnswerSetConformalizer().confidence_level == RetrievalConformalizer().confidence_level


def test_no_signature_spells_a_default_level_as_a_number() -> None:
    """A level default is the constant (or ``None``, meaning the options' default), never a literal."""
    literal = re.compile(r"^\s+confidence_level: float(?: \| None)? = \d")  # a parameter (or field) line
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if literal.search(line)
    ]
    assert found == []
