"""The counters of ``benchmarks/codebase_shape.py``: code lines and lines shared by the two adapters."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "codebase_shape.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmark_codebase_shape", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


shape = _load()

SOURCE = '''"""Module docstring,
on two lines."""

# a comment
import os


def f(x):
    """One line."""
    y = (x +
         1)  # trailing comment
    return y
'''


def test_code_lines_leave_out_docstrings_comments_and_blanks() -> None:
    # import os; def f; y = (x +; 1); return y  -> 5 lines
    assert shape._code_lines(SOURCE, ast.parse(SOURCE)) == 5


def test_a_docstring_that_is_not_first_counts_as_code() -> None:
    """Negative control: only the leading string of a body is a docstring."""
    src = 'x = 1\n"not a docstring"\n'
    assert shape._code_lines(src, ast.parse(src)) == 2


def test_adapter_overlap_counts_identical_lines_in_files_of_the_same_name(tmp_path: Path) -> None:
    for name, body in (("llamaindex", "a = 1\nb = 2\nc = 3\n"), ("langchain", "a = 1\nb = 9\nc = 3\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.py").write_text("import os\n" + body)
        (tmp_path / name / "__init__.py").write_text(body)  # never compared
    (tmp_path / "llamaindex" / "only_here.py").write_text("a = 1\n")
    got = shape._adapter_overlap(tmp_path)
    assert got == {"shared_file_names": 1, "identical_lines": 2, "lines_in_shared_names": 6}
