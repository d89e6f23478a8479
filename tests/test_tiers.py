"""The two test tiers: ``make check`` runs every test without a real-stack marker, ``make test`` runs all.

Tiers are markers, not folders: tests live in one folder per package (``tests/core`` mirrors
``conformal_rag_plugins/core``). An unmarked test that reaches the real stack fails (``tests/conftest.py``),
so the fast tier runs no model; a folder that holds only slow tests (``tests/smoke``) must carry its
marker on every file, module-wide, so none of them leaks into the fast tier.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[0]
#: Folders that hold only slow tests. Tiers are markers, not folders (tests mirror the package since issue 35):
#: an unmarked test that reaches the real stack fails in tests/conftest.py; a folder listed here must also carry
#: its marker on every file, module-wide.
REQUIRED = {"smoke": "integration"}
#: The tier folders before issue 35, for the negative control below.
FORMER_TIER_FOLDERS = {"integration": "integration", "smoke": "integration", "statistical": "statistical"}


def module_markers(path: Path) -> set[str]:
    """The marker names of a test file's module-level ``pytestmark`` (``pytest.mark.NAME``, alone or in a list)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.Assign) or not any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            continue
        for sub in ast.walk(node.value):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Attribute)
                and sub.value.attr == "mark"
                and isinstance(sub.value.value, ast.Name)
                and sub.value.value.id == "pytest"
            ):
                names.add(sub.attr)
    return names


def unmarked_files(root: Path = TESTS, required: dict[str, str] = REQUIRED) -> list[str]:
    """Test files of the slow directories whose ``pytestmark`` lacks their directory's marker."""
    bad = []
    for directory, marker in required.items():
        for path in sorted((root / directory).glob("**/test_*.py")):
            if marker not in module_markers(path):
                bad.append(f"{path.relative_to(root).as_posix()} lacks pytestmark = pytest.mark.{marker}")
    return bad


def test_every_slow_test_file_carries_its_tier_marker():
    bad = unmarked_files()
    assert not bad, "\n".join(bad)


def test_the_marker_check_can_fail(tmp_path):
    """A negative control: a missing, a wrong and a function-level marker are found; list and single forms pass."""
    for directory in FORMER_TIER_FOLDERS:
        (tmp_path / directory).mkdir()
    head = "import pytest\n\n"
    (tmp_path / "integration" / "test_ok.py").write_text(head + "pytestmark = pytest.mark.integration\n")
    (tmp_path / "integration" / "test_none.py").write_text(head + "def test_x():\n    pass\n")
    (tmp_path / "integration" / "test_function_only.py").write_text(
        head + "@pytest.mark.integration\ndef test_x():\n    pass\n"
    )
    (tmp_path / "statistical" / "test_list.py").write_text(
        head + "pytestmark = [pytest.mark.integration, pytest.mark.statistical]\n"
    )
    (tmp_path / "statistical" / "test_wrong.py").write_text(head + "pytestmark = [pytest.mark.integration]\n")
    (tmp_path / "smoke" / "test_server.py").write_text(head + "pytestmark = pytest.mark.server\n")
    assert unmarked_files(tmp_path, FORMER_TIER_FOLDERS) == [
        "integration/test_function_only.py lacks pytestmark = pytest.mark.integration",
        "integration/test_none.py lacks pytestmark = pytest.mark.integration",
        "smoke/test_server.py lacks pytestmark = pytest.mark.integration",
        "statistical/test_wrong.py lacks pytestmark = pytest.mark.statistical",
    ]


def test_the_markers_are_registered():
    """``--strict-markers`` would refuse an unregistered name; the tier markers are in pyproject.toml."""
    text = (TESTS.parent / "pyproject.toml").read_text(encoding="utf-8")
    for marker in ("integration", "statistical", "server"):
        assert f'"{marker}: ' in text, marker


def test_an_unmarked_test_cannot_load_minilm_open_chroma_or_load_gemma():
    """This test carries no marker, so the real stack refuses it (here it stays fast: nothing is loaded)."""
    from conformal_rag_plugins.local import chroma, encoder, llm
    from conformal_rag_plugins.local import llamaindex_stack as stack

    calls = [
        (encoder.MiniLMEncoder, "loads the MiniLM embedding model"),
        (encoder.get_encoder, "loads the MiniLM embedding model"),
        (chroma.chroma_client, "opens a Chroma client"),
        (lambda: stack.build_chroma_index([]), "opens a Chroma client"),  # the stack builder (open_collection)
        (llm.gemma_model_path, "loads the local Gemma model"),
    ]
    for call, what in calls:
        with pytest.raises(RuntimeError, match=f"{what}; mark it @pytest.mark.integration"):
            call()
