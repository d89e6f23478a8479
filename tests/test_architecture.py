"""The layering in ARCHITECTURE.md, checked on the code: allowed imports and a numpy-only ``core``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import conformal_rag_plugins

PKG = Path(conformal_rag_plugins.__file__).parent
# The layers, lowest first; each may import the ones listed for it (ARCHITECTURE.md's table).
_BASE = {"core", "runtime"}
_DATA = _BASE | {"storage", "datasets"}
_RETRIEVAL = _DATA | {"retrieval"}
_LIBRARY = _RETRIEVAL | {"labelling", "tuning", "monitor", "answer_sets", "evaluation", "report"}
# report: ConformalRetriever.evaluate gives the report's verdict (report/held_out.py), never the other way
_ADAPTER = _RETRIEVAL | {"labelling", "tuning", "monitor", "answer_sets", "report", "local"}
FRAMEWORK_FREE = _LIBRARY | {"local"}
ALLOWED: dict[str, set[str]] = {
    "runtime": set(),
    "core": set(),
    "storage": _BASE,
    "datasets": _BASE,
    "retrieval": _DATA,
    "labelling": _DATA,
    "tuning": _RETRIEVAL,
    "monitor": _RETRIEVAL,
    "answer_sets": _RETRIEVAL,
    "evaluation": _RETRIEVAL | {"answer_sets"},
    "report": _RETRIEVAL | {"answer_sets", "evaluation"},
    "local": _DATA,
    # an adapter's FRAMEWORK object (framework.py) implements frameworks.py's protocol and passes itself to its flows
    "llamaindex": _ADAPTER | {"frameworks"},
    "langchain": _ADAPTER | {"frameworks"},
    # the protocol and the framework-neutral flows: they take an adapter's object as an argument and import no
    # adapter; the registry that imports the adapters' objects lives in commands/framework_registry.py
    "frameworks": _LIBRARY | {"local"},
    "commands": _LIBRARY | {"frameworks", "local", "llamaindex", "langchain"},
    "cli": _LIBRARY | {"commands", "frameworks", "local", "llamaindex", "langchain"},
    "__init__": _LIBRARY,
}


def _unit(path: Path, root: Path = PKG) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _targets(path: Path, root: Path = PKG) -> set[str]:
    """First-level units of the library that ``path`` imports (relative and absolute imports)."""
    out: set[str] = set()
    here = list(path.relative_to(root).parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                parts = [p for p in [*base, *(node.module or "").split(".")] if p]
                if parts:
                    out.add(parts[0])
                elif node.names:
                    out.update(a.name for a in node.names)
            elif node.module and node.module.split(".")[0] == PKG.name:
                parts = node.module.split(".")
                out.add(parts[1] if len(parts) > 1 else node.names[0].name)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith(PKG.name + "."))
    return out


def violations(root: Path = PKG) -> list[str]:
    """Every import under ``root`` that the table does not allow."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        unit = _unit(path, root)
        for target in _targets(path, root) - {unit, "__init__"}:
            if target not in ALLOWED.get(unit, set()):
                bad.append(f"{path.relative_to(root).as_posix()} imports {target}")
    return bad


def test_every_import_follows_the_table():
    bad = violations()
    assert not bad, "imports that break ARCHITECTURE.md:\n" + "\n".join(bad)


def test_the_checker_can_fail(tmp_path):
    """A negative control: a retrieval module importing an adapter, and core importing runtime."""
    root = tmp_path / PKG.name
    (root / "retrieval").mkdir(parents=True)
    (root / "core").mkdir()
    (root / "retrieval" / "probe.py").write_text("from ..llamaindex import ConformalRetriever\n", encoding="utf-8")
    (root / "core" / "probe.py").write_text(f"from {PKG.name}.runtime import run_sync\n", encoding="utf-8")
    assert violations(root) == ["core/probe.py imports runtime", "retrieval/probe.py imports llamaindex"]


def reexport_only_modules(root: Path = PKG) -> list[str]:
    """Modules (other than ``__init__.py``) whose code is nothing but imports and ``__all__``: shims."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the module docstring
        if all(
            isinstance(node, ast.Import | ast.ImportFrom)
            or (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"])
            for node in body
        ):
            found.append(path.relative_to(root).as_posix())
    return found


def test_no_module_only_reexports_another():
    """Every module holds code of its own; no shim keeps an old import path alive (issue 22)."""
    shims = reexport_only_modules()
    assert not shims, f"modules that only re-export another module: {shims}"


def test_the_shim_check_can_fail(tmp_path):
    """A negative control: a star re-export and an import-plus-``__all__`` module are found, real code is not."""
    root = tmp_path / PKG.name
    (root / "generation").mkdir(parents=True)
    (root / "generation" / "__init__.py").write_text("from .moved import x\n", encoding="utf-8")
    (root / "generation" / "moved.py").write_text(
        '"""Moved."""\n\nfrom ..runtime.moved import *  # noqa: F403\n', encoding="utf-8"
    )
    (root / "generation" / "alias.py").write_text('from ..runtime import y\n\n__all__ = ["y"]\n', encoding="utf-8")
    real = "from ..runtime import y\n\n\ndef f():\n    return y\n"
    (root / "generation" / "real.py").write_text(real, encoding="utf-8")
    assert reexport_only_modules(root) == ["generation/alias.py", "generation/moved.py"]


#: The packages users import from; only their ``__init__`` files re-export names and define ``__all__``.
PUBLIC_INITS = {"__init__.py", "llamaindex/__init__.py", "langchain/__init__.py", "local/__init__.py"}


def reexporting_modules(root: Path = PKG) -> list[str]:
    """``__init__`` files outside :data:`PUBLIC_INITS` holding more than a docstring, and modules defining ``__all__``.

    Each name is imported from the module that defines it (``from ..core.quantile import conformal_quantile``),
    so a sub-package's ``__init__`` is its one-line docstring and nothing else (issue 35).
    """
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in PUBLIC_INITS:
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if path.name == "__init__.py":
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            if body:
                found.append(f"{rel} has code besides its docstring")
        elif any(
            isinstance(node, ast.Assign | ast.AnnAssign)
            and "__all__" in [getattr(t, "id", None) for t in getattr(node, "targets", [getattr(node, "target", None)])]
            for node in body
        ):
            found.append(f"{rel} defines __all__")
    return found


def test_only_the_public_packages_reexport_names():
    bad = reexporting_modules()
    assert not bad, "import each name from its defining module instead:\n" + "\n".join(bad)


def test_the_reexport_check_can_fail(tmp_path):
    """Negative control: a sub-package re-export and a module ``__all__`` is found; docstrings and adapters are not."""
    root = tmp_path / PKG.name
    for sub in ("core", "retrieval", "llamaindex"):
        (root / sub).mkdir(parents=True)
    (root / "__init__.py").write_text('from .core.quantile import q\n\n__all__ = ["q"]\n', encoding="utf-8")
    (root / "llamaindex" / "__init__.py").write_text('from .retriever import R\n\n__all__ = ["R"]\n', encoding="utf-8")
    (root / "retrieval" / "__init__.py").write_text('"""Retrieval calibration."""\n', encoding="utf-8")
    (root / "core" / "__init__.py").write_text('"""Statistics."""\n\nfrom .quantile import q\n', encoding="utf-8")
    (root / "core" / "quantile.py").write_text('__all__ = ["q"]\n\n\ndef q():\n    return 1\n', encoding="utf-8")
    assert reexporting_modules(root) == [
        "core/__init__.py has code besides its docstring",
        "core/quantile.py defines __all__",
    ]


def test_framework_free_layers_import_no_framework():
    frameworks = ("llama_index", "langchain", "langchain_core", "chromadb", "torch", "openai")
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if _unit(path) not in FRAMEWORK_FREE - {"local"}:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            bad += [f"{path.relative_to(PKG)}: {n}" for n in names if n.split(".")[0] in frameworks]
    assert not bad, bad


def test_core_imports_with_numpy_alone():
    blocked = [
        "skopt",
        "rouge_score",
        "scipy",
        "sklearn",
        "pydantic",
        "tqdm",
        "llama_index",
        "langchain_core",
        "chromadb",
        "torch",
        "sentence_transformers",
        "openai",
    ]
    code = (
        "import sys, importlib.util, types\n"
        f"for m in {blocked!r}: sys.modules[m] = None\n"
        # load core without running the top-level package (which needs the base dependencies)
        f"root = {str(PKG)!r}\n"
        "pkg = types.ModuleType('conformal_rag_plugins'); pkg.__path__ = [root]\n"
        "sys.modules['conformal_rag_plugins'] = pkg\n"
        # every core module (its __init__ re-exports nothing, so import each one)
        "import importlib, pathlib\n"
        "for f in sorted(pathlib.Path(root, 'core').glob('*.py')):\n"
        "    importlib.import_module('conformal_rag_plugins.core.' + f.stem)\n"
        "from conformal_rag_plugins.core.quantile import conformal_quantile\n"
        "print(conformal_quantile([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], 0.1, miss_bound=0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.9"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(root: Path = PKG) -> dict[str, set[str]]:
    """Module -> the modules of the library it imports, deferred imports inside functions included.

    ``from .pkg import name`` points at the module ``pkg.name`` when there is one, else at ``pkg``.
    """
    names = {_module_name(p, root) for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        here = _module_name(path, root)
        package = list(path.relative_to(root).parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == root.name):
                if node.level:
                    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                    parts = [*base, *(node.module or "").split(".")]
                else:
                    parts = (node.module or "").split(".")[1:]
                stem = ".".join(p for p in parts if p)
                for alias in node.names:
                    full = f"{stem}.{alias.name}" if stem else alias.name
                    targets.append(full if full in names else stem)
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".", 1)[1] for a in node.names if a.name.startswith(root.name + ".")]
            edges.setdefault(here, set()).update(t for t in targets if t and t != here)
    return edges


def in_package_circles(root: Path = PKG) -> list[list[str]]:
    """Import circles between the modules of one sub-package (an import of the sub-package's ``__init__`` aside).

    The strongly connected components of more than one module, each sorted, in name order.
    """
    room = {
        m: {t for t in ts if "." in t and t.split(".")[0] == m.split(".")[0]} for m, ts in module_imports(root).items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(room.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(room):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_import_circle_inside_a_package():
    """No module of a sub-package reaches itself through its siblings (deferred imports count: issue 35)."""
    circles = in_package_circles()
    assert circles == [], "import circles inside a package:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_can_fail(tmp_path):
    """A negative control: a circle closed by an import inside a function is found; a one-way chain is not."""
    root = tmp_path / PKG.name
    (root / "datasets").mkdir(parents=True)
    (root / "datasets" / "__init__.py").write_text("", encoding="utf-8")
    (root / "datasets" / "a.py").write_text("from .b import x\n", encoding="utf-8")
    (root / "datasets" / "b.py").write_text("def x():\n    from . import a\n", encoding="utf-8")
    (root / "datasets" / "c.py").write_text(f"from {PKG.name}.datasets.a import x\n", encoding="utf-8")
    assert in_package_circles(root) == [["datasets.a", "datasets.b"]]
