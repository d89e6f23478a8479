"""Tests mirror the package: a newcomer finds a module's tests from its path (issue 35).

Every module ``conformal_rag_plugins/<pkg>/<module>.py`` has ``tests/<pkg>/test_<module>.py`` (or
``test_<module>_<what>.py`` when there are several), or a row in ``tests/<pkg>/COVERAGE.md`` naming the
test files that exercise it; each file named there exists and names the module. Top-level modules
(``cli.py``, ``frameworks.py``) are tested in ``tests/`` itself. Tiers are markers (``tests/conftest.py``),
not folders: a test file lives in its package's folder or in one of the folders for what spans packages.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PKG = TESTS.parent / "conformal_rag_plugins"
#: Folders for what spans packages: the docs, the examples, the fresh-cache smoke run, the measuring scripts.
CONCEPT_FOLDERS = {"docs", "examples", "smoke", "benchmarks"}
ROW = re.compile(r"^\|\s*`(?P<module>[\w]+\.py)`\s*\|(?P<tests>.*)\|\s*$")


def library_modules(pkg: Path = PKG) -> list[str]:
    """Dotted names of the package's modules (an ``__init__.py`` is its package, not a module)."""
    root = pkg.parent
    return sorted(
        ".".join(p.relative_to(root).with_suffix("").parts) for p in pkg.rglob("*.py") if p.name != "__init__.py"
    )


def home(module: str, tests: Path = TESTS) -> Path:
    """``conformal_rag_plugins.core.quantile`` -> ``tests/core``; a top-level module -> ``tests``."""
    parts = module.split(".")[1:-1]
    return tests.joinpath(*parts)


def own_tests(module: str, tests: Path = TESTS) -> list[Path]:
    stem = module.rsplit(".", 1)[1]
    return [p for p in home(module, tests).glob(f"test_{stem}*.py") if re.fullmatch(rf"test_{stem}(_\w+)?\.py", p.name)]


def mentions(text: str, module: str) -> bool:
    """A test names a module: dotted (``commands.tables``), as a path (``commands/tables.py``) or imported."""
    package, _, stem = module.rpartition(".")
    short = module.split(".", 1)[1]
    path = module.replace(".", "/") + ".py"
    if re.search(rf"\b{re.escape(module)}\b", text) or path in text or path.split("/", 1)[1] in text:
        return True
    if "." in short and re.search(rf"(?<![\w.]){re.escape(short)}\b", text):
        return True
    return bool(re.search(rf"from {re.escape(package)} import \(?[^)\n]*(?:\n[^)]*)?\b{stem}\b", text))


def notes(tests: Path = TESTS) -> dict[str, list[tuple[str, str]]]:
    """module -> [(test file as written, resolved path)] from every ``COVERAGE.md`` under ``tests``."""
    out: dict[str, list[tuple[str, str]]] = {}
    pkg_name = PKG.name
    for note in sorted(tests.rglob("COVERAGE.md")):
        folder = note.parent.relative_to(tests).parts
        for line in note.read_text(encoding="utf-8").splitlines():
            match = ROW.match(line)
            if match is None:
                continue
            module = ".".join((pkg_name, *folder, match["module"].removesuffix(".py")))
            files = re.findall(r"`([^`]+)`", match["tests"])
            out[module] = [(f, str((note.parent / f).resolve())) for f in files]
    return out


def layout_problems(pkg: Path = PKG, tests: Path = TESTS) -> list[str]:
    """Every module without a test file or a note, every note naming a missing file or one silent on the module."""
    problems = []
    modules = library_modules(pkg)
    rows = notes(tests)
    for module in modules:
        if not own_tests(module, tests) and not rows.get(module):
            where = home(module, tests).relative_to(tests.parent).as_posix()
            problems.append(
                f"{module}: no {where}/test_{module.rsplit('.', 1)[1]}*.py and no row in {where}/COVERAGE.md"
            )
    for module, files in rows.items():
        if module not in modules:
            problems.append(f"COVERAGE.md names {module}, which is not a module any more")
            continue
        for written, resolved in files:
            path = Path(resolved)
            if not path.is_file():
                problems.append(f"{module}: the note's {written} does not exist")
            elif not mentions(path.read_text(encoding="utf-8"), module):
                problems.append(f"{module}: the note's {written} does not name the module")
    return problems


def misplaced_test_files(pkg: Path = PKG, tests: Path = TESTS) -> list[str]:
    """Test files outside ``tests/``, a package's folder (``tests/core``) or a folder for what spans packages."""
    packages = {p.relative_to(pkg).as_posix() for p in pkg.rglob("__init__.py")}
    packages = {str(Path(p).parent) for p in packages} - {"."}
    bad = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests).as_posix()
        if folder != "." and folder not in packages and folder.split("/")[0] not in CONCEPT_FOLDERS:
            bad.append(path.relative_to(tests).as_posix())
    return bad


def test_every_module_has_a_test_file_or_a_note():
    problems = layout_problems()
    assert not problems, "\n".join(problems)


def test_every_test_file_is_in_its_package_folder():
    bad = misplaced_test_files()
    assert not bad, "tests live in one folder per package (tier by marker): " + ", ".join(bad)


def test_the_layout_check_can_fail(tmp_path):
    """A negative control on a made-up package: each kind of problem is found, a good layout passes."""
    pkg = tmp_path / "conformal_rag_plugins"
    tests = tmp_path / "tests"
    for rel in (
        "__init__.py",
        "cli.py",
        "core/__init__.py",
        "core/quantile.py",
        "core/pools.py",
        "commands/__init__.py",
        "commands/tables.py",
        "commands/report.py",
        "commands/levels.py",
    ):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text("")
    for rel, text in {
        "test_cli.py": "",
        "core/test_quantile_flagged.py": "",
        "commands/test_report_host.py": "from conformal_rag_plugins.commands import report_host\n",
        "commands/test_cli_help.py": "# Covers conformal_rag_plugins.commands.tables\n",
        "unit/test_pools.py": "",
    }.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text(text)
    (tests / "commands" / "COVERAGE.md").write_text(
        "| module | tested by |\n| --- | --- |\n"
        "| `tables.py` | `test_cli_help.py` |\n"
        "| `report.py` | `test_report_host.py` |\n"  # names report_host, not report
        "| `levels.py` | `test_levels_gone.py` |\n"
        "| `gone.py` | `test_cli_help.py` |\n"
    )
    assert layout_problems(pkg, tests) == [
        "conformal_rag_plugins.core.pools: no tests/core/test_pools*.py and no row in tests/core/COVERAGE.md",
        "conformal_rag_plugins.commands.report: the note's test_report_host.py does not name the module",
        "conformal_rag_plugins.commands.levels: the note's test_levels_gone.py does not exist",
        "COVERAGE.md names conformal_rag_plugins.commands.gone, which is not a module any more",
    ]
    assert misplaced_test_files(pkg, tests) == ["unit/test_pools.py"]
    assert mentions(
        "from conformal_rag_plugins.commands import (\n    hosts,\n    tables,\n)",
        "conformal_rag_plugins.commands.tables",
    )
    assert not mentions("conformal_rag_plugins.commands.report_host", "conformal_rag_plugins.commands.report")
