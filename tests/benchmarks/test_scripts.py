"""The measuring scripts of ``benchmarks/``: ``codebase_shape.py``'s counters (code lines, lines shared by
the two adapters) and ``suite_times.py``'s reading of pytest's summary (an unfinished run refused)."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", _BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


shape = _load("codebase_shape")
times = _load("suite_times")

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


LOG = """\
........s...F
============================= slowest 15 durations =============================
575.36s call     tests/examples/test_notebooks.py::test_notebook_runs[langchain.ipynb]
241.65s setup    tests/statistical/test_shipped.py::test_cover[llamaindex-frequency]
=========================== short test summary info ============================
FAILED tests/unit/test_x.py::test_y - assert 1 == 2
1 failed, 2997 passed, 26 skipped, 61 warnings, 2 errors in 2307.59s (0:38:27)
"""


def test_counts_time_and_slowest_phases_are_read_from_the_summary() -> None:
    r = times.parse_pytest_output(LOG)
    assert r["counts"] == {"failed": 1, "passed": 2997, "skipped": 26, "warnings": 61, "errors": 2}
    assert r["pytest_seconds"] == 2307.59
    assert [(s["seconds"], s["phase"]) for s in r["slowest"]] == [(575.36, "call"), (241.65, "setup")]
    assert r["slowest"][1]["test"] == "tests/statistical/test_shipped.py::test_cover[llamaindex-frequency]"


def test_an_unfinished_run_is_refused() -> None:
    # negative control: the same output cut before its summary line has no time to report
    cut = LOG.rsplit("1 failed", 1)[0]
    with pytest.raises(ValueError, match="did not finish"):
        times.parse_pytest_output(cut)


def test_a_log_is_written_as_json_and_markdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "run.log"
    log.write_text(LOG)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    monkeypatch.setattr(times, "ROOT", tmp_path)
    assert times.main(["--tier", "full", "--label", "t", "--log", str(log)]) == 0
    saved = json.loads((tmp_path / "benchmarks" / "results" / "suite_times_t.json").read_text())
    assert saved["pytest_seconds"] == 2307.59 and saved["wall_seconds"] is None and saved["tier"] == "full"
    assert "| 575.4 | call |" in (tmp_path / "benchmarks" / "results" / "suite_times_t.md").read_text()
    log.write_text(LOG.rsplit("1 failed", 1)[0])
    assert times.main(["--label", "u", "--log", str(log)]) == 2
    assert not (tmp_path / "benchmarks" / "results" / "suite_times_u.json").exists()
