"""The framework registry (``conformal_rag_plugins/frameworks.py``): complete entries, lazy imports, no branches.

No model is loaded: the entries are inspected, not run (building hosts needs MiniLM and Chroma).
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import conformal_rag_plugins
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.frameworks import FRAMEWORKS, FrameworkAdapter, RegisteredEntry, get_framework

ROOT = Path(conformal_rag_plugins.__file__).resolve().parents[1]
#: Where no framework may be named in a comparison: the command line and the benchmarks use the registry.
NO_BRANCHES = [
    ROOT / "conformal_rag_plugins" / "commands",
    ROOT / "conformal_rag_plugins" / "cli.py",
    ROOT / "benchmarks",
]


def _operations() -> list[str]:
    """The protocol's methods and attributes (its whole contract)."""
    names = [n for n, v in vars(FrameworkAdapter).items() if not n.startswith("_") and inspect.isfunction(v)]
    return [*sorted(names), "name"]


def test_the_protocol_names_the_operations_the_commands_need() -> None:
    # a guard on the guard below: an empty protocol would make every entry "complete"
    ops = _operations()
    assert len(ops) >= 15
    for op in ("build_hosts", "calibrate_retriever", "chunk_entries", "label_with_judge", "rebuildable_host"):
        assert op in ops


def test_frameworks_are_the_registered_ones() -> None:
    assert FRAMEWORKS == ("llamaindex", "langchain")


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_every_entry_implements_every_operation(name: str) -> None:
    entry = get_framework(name)
    assert entry.name == name
    assert isinstance(entry, FrameworkAdapter)
    missing = [op for op in _operations() if not hasattr(entry, op)]
    assert not missing, f"{name} lacks {missing}"
    for op in _operations():
        if op == "name":
            continue
        want = inspect.signature(getattr(FrameworkAdapter, op))
        got = inspect.signature(getattr(type(entry), op))
        assert list(got.parameters) == list(want.parameters), (name, op, got, want)
    assert get_framework(name) is entry  # one entry per framework, built once


def _defined(target: str) -> bool:
    """Whether ``module:function`` is defined or assigned at the top of that module (read, not imported)."""
    module, _, name = target.partition(":")
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8")) if path.is_file() else ast.Module(body=[], type_ignores=[])
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return name in defined | assigned


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_every_forwarded_operation_names_an_adapter_function(name: str) -> None:
    entry = get_framework(name)
    forwarded = {op for op in _operations() if getattr(type(entry), op, None) is getattr(RegisteredEntry, op, 0)}
    # build_llm and build_hosts are written once in RegisteredEntry (build_hosts on the entry's hosts_on, fetch_on)
    assert forwarded == {*entry.functions, "build_llm", "build_hosts"}, (name, forwarded ^ set(entry.functions))
    for hook in ("hosts_on", "fetch_on"):
        assert getattr(type(entry), hook) is not getattr(RegisteredEntry, hook), (name, hook)
    targets = [f"{entry.package}.{t}" for t in entry.functions.values()]
    missing = [t for t in [*targets, f"{entry.models}:local_llm", f"{entry.models}:default_llm"] if not _defined(t)]
    assert not missing, f"{name}: no such function {missing}"


def test_the_forwarding_check_can_fail() -> None:
    """A negative control: a misspelt function or module is found."""
    assert _defined("conformal_rag_plugins.frameworks:get_framework")
    assert not _defined("conformal_rag_plugins.frameworks:get_frameworks")
    assert not _defined("conformal_rag_plugins.no_such_module:get_framework")


def test_an_incomplete_entry_is_not_an_adapter() -> None:
    """A negative control: the protocol check can fail."""

    class Half:
        name = "half"

        def chunk_entries(self, entries, *, chunk_size, chunk_overlap):
            return []

    assert not isinstance(Half(), FrameworkAdapter)


def test_an_unknown_framework_is_a_clear_error() -> None:
    with pytest.raises(ConformalError, match=r"framework must be one of \('llamaindex', 'langchain'\), got 'x'"):
        get_framework("x")


def test_importing_the_registry_imports_no_framework() -> None:
    code = (
        "import sys\n"
        "import conformal_rag_plugins.frameworks as f\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('llama_index', 'langchain_core', 'langchain')\n"
        "             or m.startswith(('conformal_rag_plugins.llamaindex', 'conformal_rag_plugins.langchain'))))\n"
        "print(f.FRAMEWORKS)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "('llamaindex', 'langchain')"], out.stdout


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def framework_branches(paths: list[Path]) -> list[str]:
    """Comparisons with a framework's name (``framework == "llamaindex"``, ``spec[0] != "langchain"``, ``in``)."""
    found = []
    files = [p for path in paths for p in ([path] if path.is_file() else sorted(path.rglob("*.py")))]
    for path in files:
        nodes = sorted(ast.walk(ast.parse(path.read_text(encoding="utf-8"))), key=_position)
        for node in nodes:
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            literals = [
                e
                for o in operands
                for e in ([o] if not isinstance(o, ast.Tuple | ast.List | ast.Set) else o.elts)
                if isinstance(e, ast.Constant)
            ]
            if any(e.value in FRAMEWORKS for e in literals):
                where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_commands_and_benchmarks_do_not_branch_on_a_framework() -> None:
    bad = framework_branches(NO_BRANCHES)
    assert not bad, "use conformal_rag_plugins.frameworks.get_framework instead:\n" + "\n".join(bad)


def test_the_branch_check_can_fail(tmp_path) -> None:
    """A negative control: the branches this registry replaced are found, a dictionary lookup is not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(framework, spec, fp):\n"
        "    if framework == 'llamaindex':\n"
        "        return 1\n"
        "    ask = 2 if spec[0] == 'langchain' else 3\n"
        "    if fp.framework in ('llamaindex',):\n"
        "        return ask\n"
        "    return {'llamaindex': 1}[framework]\n",
        encoding="utf-8",
    )
    found = [line.split(": ", 1)[1] for line in framework_branches([probe])]
    assert found == ["framework == 'llamaindex'", "spec[0] == 'langchain'", "fp.framework in ('llamaindex',)"]
