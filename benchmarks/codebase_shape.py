"""Measure the shape of the package: modules and lines per package, wide functions, public names.

Run ``python benchmarks/codebase_shape.py --label after`` from the repository root. It writes
``benchmarks/results/codebase_shape_<label>.{json,md}``. The numbers are counts read from the source
with :mod:`ast`; nothing is imported except the package's top level (for its public names).

Measured:

- modules and lines per sub-package;
- functions and methods with more than 8 parameters (``self``/``cls`` not counted), public ones
  (no leading underscore in the function or module path) listed by name;
- names exported by the top-level package (``conformal_rag_plugins.__all__``) and the total of
  ``__all__`` entries across every module;
- ``framework ==`` comparisons in ``conformal_rag_plugins/`` and ``benchmarks/``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "conformal_rag_plugins"
_FRAMEWORK_BRANCH = re.compile(r"framework\s*==")


def _param_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    if names and names[0] in {"self", "cls"}:
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def _is_private(module: str, qualname: str) -> bool:
    parts = module.split(".") + qualname.split(".")
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def measure() -> dict:
    packages: dict[str, dict[str, int]] = {}
    wide: list[dict] = []
    all_entries = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        pkg = rel.parts[0] if len(rel.parts) > 1 else "(top level)"
        text = path.read_text()
        entry = packages.setdefault(pkg, {"modules": 0, "lines": 0})
        entry["modules"] += 1
        entry["lines"] += len(text.splitlines())
        tree = ast.parse(text)
        module = ".".join(("conformal_rag_plugins", *rel.with_suffix("").parts))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                and isinstance(node.value, (ast.List, ast.Tuple))
            ):
                all_entries += len(node.value.elts)
        for parent in ast.walk(tree):
            for node in ast.iter_child_nodes(parent):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = _param_count(node)
                    if n > 8:
                        qual = f"{parent.name}.{node.name}" if isinstance(parent, ast.ClassDef) else node.name
                        wide.append(
                            {
                                "module": module,
                                "function": qual,
                                "parameters": n,
                                "public": not _is_private(module, qual),
                            }
                        )
    branches = 0
    for base in (PACKAGE, ROOT / "benchmarks"):
        for path in base.rglob("*.py"):
            if path.name == Path(__file__).name:
                continue
            branches += len(_FRAMEWORK_BRANCH.findall(path.read_text()))
    sys.path.insert(0, str(ROOT))
    import conformal_rag_plugins

    top = list(getattr(conformal_rag_plugins, "__all__", []))
    total_modules = sum(p["modules"] for p in packages.values())
    total_lines = sum(p["lines"] for p in packages.values())
    return {
        "packages": packages,
        "total_modules": total_modules,
        "total_lines": total_lines,
        "functions_over_8_parameters": len(wide),
        "public_functions_over_8_parameters": sum(w["public"] for w in wide),
        "functions_15_or_more_parameters": sum(w["parameters"] >= 15 for w in wide),
        "wide_functions": sorted(wide, key=lambda w: -w["parameters"]),
        "top_level_public_names": len(top),
        "all_entries_in_every_module": all_entries,
        "framework_eq_branches": branches,
    }


def markdown(result: dict, label: str) -> str:
    lines = [
        f"# Codebase shape ({label})",
        "",
        "| package | modules | lines |",
        "|---|---|---|",
    ]
    for name, p in sorted(result["packages"].items()):
        lines.append(f"| `{name}` | {p['modules']} | {p['lines']:,} |")
    lines.append(f"| **total** | {result['total_modules']} | {result['total_lines']:,} |")
    lines += [
        "",
        "| measure | value |",
        "|---|---|",
        f"| functions with more than 8 parameters | {result['functions_over_8_parameters']} |",
        f"| of which public | {result['public_functions_over_8_parameters']} |",
        f"| functions with 15 or more parameters | {result['functions_15_or_more_parameters']} |",
        f"| top-level public names | {result['top_level_public_names']} |",
        f"| `__all__` entries in every module | {result['all_entries_in_every_module']} |",
        f"| `framework ==` branches | {result['framework_eq_branches']} |",
        "",
        "Command: `python benchmarks/codebase_shape.py --label " + label + "`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="now", help="suffix of the result files (default: now)")
    args = parser.parse_args(argv)
    result = measure()
    out = ROOT / "benchmarks" / "results"
    (out / f"codebase_shape_{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"codebase_shape_{args.label}.md").write_text(markdown(result, args.label))
    print(markdown(result, args.label))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
