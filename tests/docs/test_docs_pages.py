"""Every Python block of the documentation site and the README runs as shown, page by page (Sybil).

A page is one test: its blocks run in order in one namespace, in a fresh working directory, on the real
offline stack (MiniLM, Chroma, the bundled SQuAD data). The quick starts and the long-documents page are
complete scripts. A block that uses the reader's own objects (``index``, ``examples``, ``llm``) is marked by
an invisible block just before it, ``<!-- invisible-code-block: python ... -->``, that takes them from
``docs_objects`` (:class:`DocsObjects`): real objects over the bundled data, not fakes.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

from ..examples.test_example_scripts import QUICKSTARTS, check_quickstart_output

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    p
    for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    if re.search(r"^```python", p.read_text(encoding="utf-8"), flags=re.MULTILINE)
)
SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])


def test_every_page_with_python_is_collected() -> None:
    """The pages the site teaches from are all here (a renamed folder would otherwise drop them silently)."""
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/quickstart-llamaindex.md", "docs/quickstart-langchain.md"} <= names
    assert {"docs/long-documents.md", "docs/answer-sets.md"} <= names


def test_no_block_is_skipped() -> None:
    """Docs are tests: no page may skip a block (``<!-- skip: ... -->``)."""
    skipping = [p.name for p in PAGES if "<!-- skip:" in p.read_text(encoding="utf-8")]
    assert skipping == []


@pytest.mark.integration
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_runs_as_shown(
    page: Path, docs_objects, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's blocks run as shown; a quick start's output is what its example script shows a user."""
    monkeypatch.chdir(tmp_path)  # files the page writes (calibration.json, ...) land here
    document = SYBIL.parse(page)
    document.namespace["docs_objects"] = docs_objects
    examples = list(document.examples())
    assert examples, f"{page} has Python blocks but Sybil found none"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for example in examples:
            example.evaluate()
    if page.relative_to(ROOT).as_posix() in QUICKSTARTS.values():  # also examples/<framework>_quickstart.py
        check_quickstart_output(capsys.readouterr().out, [type(w.message).__name__ for w in caught], tmp_path)
