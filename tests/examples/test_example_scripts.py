"""The example scripts are the quick-start pages' first blocks, word for word, so the docs test runs them.

``examples/<framework>_quickstart.py`` is its page's first four Python blocks (the whole app, the one-line swap,
the held-out verdict, the tuned host) under a docstring. ``tests/docs/test_docs_pages.py`` runs those blocks as
shown, in order, on the real stack (MiniLM, Chroma, the bundled Gemma), and checks what a user running the
script would see (:func:`check_quickstart_output`): one run proves the page and the script.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPT_BLOCKS = 4  # the page blocks a script holds
QUICKSTARTS = {
    "llamaindex_quickstart.py": "docs/quickstart-llamaindex.md",
    "langchain_quickstart.py": "docs/quickstart-langchain.md",
}


def page_blocks(page: str) -> list[str]:
    """The Python blocks of a docs page, as Sybil runs them."""
    return [str(e.parsed) for e in Sybil(parsers=[PythonCodeBlockParser()]).parse(ROOT / page).examples()]


def script_code(script: str) -> str:
    """The script's text after its module docstring."""
    text = (EXAMPLES / script).read_text(encoding="utf-8")
    docstring = ast.parse(text).body[0]
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant), f"{script}: no docstring"
    return "\n".join(text.splitlines()[docstring.end_lineno :]).lstrip("\n") + "\n"


def check_quickstart_output(stdout: str, warning_names: list[str], workdir: Path) -> None:
    """What a user running a quick-start script sees (asserted on the page's run of the same blocks)."""
    assert "TruncationWarning" not in warning_names  # the examples split long passages before embedding them
    assert "split alpha=0.1" in stdout
    # the verdict of the app's own host and of the tuned one
    assert re.search(r"^your (index|store): held-out coverage", stdout, re.MULTILINE), stdout[-2000:]
    assert re.search(r"^tuned: +held-out coverage", stdout, re.MULTILINE), stdout[-2000:]
    assert (workdir / "tuned_calibration.json").exists()
    # the app answers the held-out question: the base model, prompted with one worked example, does not
    # open with a newline (a zero-shot prompt gave LlamaIndex's "Empty Response" and an empty LangChain string)
    (line,) = [ln for ln in stdout.splitlines() if " -> " in ln]
    answer = line.split(" -> ", 1)[1].split(" (", 1)[0].strip()
    assert answer and answer != "Empty Response", line


@pytest.mark.parametrize("script", sorted(QUICKSTARTS))
def test_example_script_is_its_pages_first_blocks(script: str) -> None:
    """The script runs as the docs test runs its page: the same code, word for word."""
    blocks = page_blocks(QUICKSTARTS[script])
    assert len(blocks) > SCRIPT_BLOCKS
    assert script_code(script) == "\n".join(blocks[:SCRIPT_BLOCKS])


def test_script_check_fails_on_an_empty_answer(tmp_path: Path) -> None:
    """The output check can fail: an app that printed LlamaIndex's "Empty Response" is refused."""
    (tmp_path / "tuned_calibration.json").write_text("{}")
    good = (
        "split alpha=0.1\nQ? -> Rollo (3 chunks kept)\n"
        "your index: held-out coverage 0.9\ntuned:      held-out coverage 0.9\n"
    )
    check_quickstart_output(good, [], tmp_path)
    with pytest.raises(AssertionError):
        check_quickstart_output(good.replace("Rollo", "Empty Response"), [], tmp_path)
    with pytest.raises(AssertionError):
        check_quickstart_output(good, ["TruncationWarning"], tmp_path)


def test_every_example_script_is_a_quickstart() -> None:
    """A new script needs its own run (here or in the docs test)."""
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(QUICKSTARTS)


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_scripts_import_only_public_modules(script: str) -> None:
    """A reader copies the examples into an app: every name they import is public."""
    text = (EXAMPLES / script).read_text(encoding="utf-8")
    modules = set(re.findall(r"^from (conformal_rag_plugins[\w.]*) import", text, re.MULTILINE))
    public = {"conformal_rag_plugins", "conformal_rag_plugins.llamaindex", "conformal_rag_plugins.langchain"}
    assert modules <= public | {"conformal_rag_plugins.local"}
