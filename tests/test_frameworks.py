"""The framework registry (``commands/framework_registry.py``) and the adapters' ``FRAMEWORK`` objects.

Complete objects (every method of ``frameworks.FrameworkAdapter``), lazy imports, no branches on a
framework's name, and no call routed by a string. No model is loaded: the objects are inspected, not
run (building hosts needs MiniLM and Chroma).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import conformal_rag_plugins
from conformal_rag_plugins.commands.framework_registry import FRAMEWORKS, get_framework
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.frameworks import FrameworkAdapter, IndexRequest

ROOT = Path(conformal_rag_plugins.__file__).resolve().parents[1]
PKG = ROOT / "conformal_rag_plugins"
#: The adapters' objects the registry hands out (one module each).
FRAMEWORK_MODULES = {"llamaindex": PKG / "llamaindex" / "framework.py", "langchain": PKG / "langchain" / "framework.py"}
#: Where no framework may be named in a comparison: the command line and the benchmarks use the registry.
NO_BRANCHES = [
    ROOT / "conformal_rag_plugins" / "commands",
    ROOT / "conformal_rag_plugins" / "cli.py",
    ROOT / "benchmarks",
]


def _operations() -> list[str]:
    """The protocol's methods and attributes (its whole contract)."""
    names = {
        n
        for proto in FrameworkAdapter.__mro__
        if proto.__module__ == FrameworkAdapter.__module__
        for n, v in vars(proto).items()
        if not n.startswith("_") and inspect.isfunction(v)
    }
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
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    annotated = {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return name in defined | assigned | annotated


def imported_functions(path: Path) -> list[str]:
    """``module:name`` of every ``from .x import name`` in ``path`` (relative imports, resolved to modules)."""
    package = path.relative_to(ROOT).parent.parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            base = package[: len(package) - (node.level - 1)]
            found += [".".join([*base, node.module]) + f":{a.name}" for a in node.names]
    return found


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_every_operation_is_written_on_the_framework_object(name: str) -> None:
    """Each operation is a method of the adapter's own class, and each function it imports exists."""
    entry = get_framework(name)
    # the adapter's own classes: FRAMEWORK extends the tuned-host part ``from_documents`` uses (tuned_host.py)
    classes = [c for c in type(entry).__mro__ if c.__module__.startswith(f"conformal_rag_plugins.{name}.")]
    own = {n for c in classes for n in vars(c)}
    assert type(entry).__module__ == f"conformal_rag_plugins.{name}.framework"
    assert [op for op in _operations() if op not in own] == [], name  # written in the adapter, not forwarded
    imported = imported_functions(FRAMEWORK_MODULES[name]) + imported_functions(PKG / name / "tuned_host.py")
    # the adapter functions it calls (and the offline stack's LLMs): a reader follows each import to its code
    for target in (f"conformal_rag_plugins.{name}.calibrate:calibrate_retriever",
                   f"conformal_rag_plugins.{name}.hybrid_tuning:calibrate_hybrid_retriever",
                   f"conformal_rag_plugins.{name}.judge_labels:label_with_judge",
                   f"conformal_rag_plugins.{name}.question_gen:generate_calibration_questions"):  # fmt: skip
        assert target in imported, (name, target)
    missing = [t for t in imported if not t.startswith("conformal_rag_plugins.frameworks") and not _defined(t)]
    assert not missing, f"{name}: no such function {missing}"
    assert any(t.endswith(":local_llm") for t in imported) and any(t.endswith(":default_llm") for t in imported)


def test_the_forwarding_check_can_fail() -> None:
    """A negative control: a misspelt function or module is found."""
    assert _defined("conformal_rag_plugins.commands.framework_registry:get_framework")
    assert _defined("conformal_rag_plugins.llamaindex.framework:FRAMEWORK")
    assert not _defined("conformal_rag_plugins.commands.framework_registry:get_frameworks")
    assert not _defined("conformal_rag_plugins.no_such_module:get_framework")


def string_routed_calls(paths: list[Path]) -> list[str]:
    """Calls a reader cannot follow: ``importlib.import_module``, ``__import__``, calling ``getattr(x, name)``.

    Reading an attribute by a computed name (``getattr(args, option)``) is not a call and is not found.
    """
    found = []
    for path in [p for root in paths for p in ([root] if root.is_file() else sorted(root.rglob("*.py")))]:
        for node in sorted(ast.walk(ast.parse(path.read_text(encoding="utf-8"))), key=_position):
            if not isinstance(node, ast.Call):
                continue
            func = ast.unparse(node.func)
            inner = node.func if isinstance(node.func, ast.Call) else None
            called_by_name = (
                inner is not None
                and ast.unparse(inner.func) == "getattr"
                and len(inner.args) >= 2
                and not isinstance(inner.args[1], ast.Constant)
            )
            if func in ("importlib.import_module", "import_module", "__import__") or called_by_name:
                found.append(f"{path.relative_to(path.parents[2]).as_posix()}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_routes_between_the_command_line_and_the_adapters_are_imports() -> None:
    """No call between the commands, the neutral flows and the adapters' objects is routed by a string."""
    paths = [PKG / "frameworks.py", PKG / "commands", PKG / "cli.py", *FRAMEWORK_MODULES.values(),
             PKG / "llamaindex" / "from_documents.py", PKG / "langchain" / "from_documents.py"]  # fmt: skip
    bad = string_routed_calls(paths)
    assert not bad, "call by import instead:\n" + "\n".join(bad)


def test_the_string_route_check_can_fail(tmp_path) -> None:
    """A negative control: the routes this redesign removed are found; a constant or uncalled ``getattr`` is not."""
    pkg = tmp_path / "a" / "b"
    pkg.mkdir(parents=True)
    probe = pkg / "probe.py"
    probe.write_text(
        "import importlib\n"
        "def f(module, attr, build, adapter):\n"
        "    g = getattr(importlib.import_module(module), attr)(1)\n"
        "    h = getattr(adapter, build)(kind=2)\n"
        "    return g, h, getattr(adapter, 'name')(), getattr(adapter, build)\n",
        encoding="utf-8",
    )
    found = [line.split(": ", 1)[1] for line in string_routed_calls([probe])]
    assert found == ["getattr(importlib.import_module(module), attr)(1)", "importlib.import_module(module)",
                     "getattr(adapter, build)(kind=2)"]  # fmt: skip


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
        "import conformal_rag_plugins.frameworks\n"
        "import conformal_rag_plugins.commands.framework_registry as f\n"
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
    assert not bad, "use conformal_rag_plugins.commands.framework_registry.get_framework instead:\n" + "\n".join(bad)


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


def test_looking_up_llamaindex_imports_no_langchain() -> None:
    """The registry's loaders are plain imports run on demand: a LlamaIndex run never loads LangChain."""
    code = (
        "import sys\n"
        "from conformal_rag_plugins.commands.framework_registry import get_framework\n"
        "from conformal_rag_plugins.llamaindex.framework import FRAMEWORK\n"
        "assert get_framework('llamaindex') is FRAMEWORK\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'langchain')\n"
        "             or m.startswith('conformal_rag_plugins.langchain')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]"], out.stdout


def test_an_index_request_is_frozen_and_a_host_request_has_one_pool_size() -> None:
    """``build_hosts`` reads ``request.pool_size``: a fan-out's several pool sizes are refused, not guessed."""
    host = IndexRequest("dense", [], grid=(), pool_sizes=(30,), client=None, collection_name="crp-x")
    assert host.pool_size == 30 and not host.show_progress and not host.whole_documents
    for sizes in [(20, 50), ()]:
        fanout = dataclasses.replace(host, pool_sizes=sizes)
        with pytest.raises(ValueError, match="one pool size"):
            _ = fanout.pool_size
    with pytest.raises(dataclasses.FrozenInstanceError):
        host.kind = "bm25"  # type: ignore[misc]


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_adapters_take_an_index_request_whole(name: str) -> None:
    """The two index-building methods take one option object, not a keyword chain (issue 35)."""
    entry = type(get_framework(name))
    for op in ("build_hosts", "build_fanout"):
        assert list(inspect.signature(getattr(entry, op)).parameters) == ["self", "request"], (name, op)
