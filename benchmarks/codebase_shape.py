"""Measure the shape of the package: modules and lines per package, wide functions, public names.

Run ``python benchmarks/codebase_shape.py --label after`` from the repository root. It writes
``benchmarks/results/codebase_shape_<label>.{json,md}``. The numbers are counts read from the source
with :mod:`ast`; nothing is imported except the package's top level (for its public names).
``--root DIR`` measures another checkout (e.g. an older commit from ``git worktree add``).

Measured:

- modules, lines and code lines (not blank, not a comment, not a docstring) per sub-package;
- identical lines across the two adapters: for each file name found in both ``llamaindex/`` and
  ``langchain/``, the non-blank, non-import lines :mod:`difflib` matches between the two files;
- functions and methods with more than 8 parameters (``self``/``cls`` not counted), public ones
  (no leading underscore in the function or module path) listed by name;
- names exported by the top-level package (``conformal_rag_plugins.__all__``) and the total of
  ``__all__`` entries across every module;
- ``framework ==`` comparisons in ``conformal_rag_plugins/`` and ``benchmarks/``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def _code_lines(text: str, tree: ast.Module) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc)


def _adapter_overlap(package: Path) -> dict[str, int]:
    """Identical non-blank, non-import lines in the files whose name both adapters use."""

    def lines(path: Path) -> list[str]:
        out = [ln.strip() for ln in path.read_text().splitlines()]
        return [ln for ln in out if ln and not ln.startswith(("import ", "from ", "#"))]

    names = sorted(
        {p.name for p in (package / "llamaindex").glob("*.py")}
        & {p.name for p in (package / "langchain").glob("*.py")} - {"__init__.py"}
    )
    same = total = 0
    for name in names:
        a, b = lines(package / "llamaindex" / name), lines(package / "langchain" / name)
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        same += sum(m.size for m in matcher.get_matching_blocks())
        total += len(a) + len(b)
    return {"shared_file_names": len(names), "identical_lines": same, "lines_in_shared_names": total}


def measure(root: Path = ROOT) -> dict:
    package = root / "conformal_rag_plugins"
    packages: dict[str, dict[str, int]] = {}
    wide: list[dict] = []
    all_entries = 0
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        pkg = rel.parts[0] if len(rel.parts) > 1 else "(top level)"
        text = path.read_text()
        entry = packages.setdefault(pkg, {"modules": 0, "lines": 0, "code_lines": 0})
        tree = ast.parse(text)
        entry["modules"] += 1
        entry["lines"] += len(text.splitlines())
        entry["code_lines"] += _code_lines(text, tree)
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
    for base in (package, root / "benchmarks"):
        for path in base.rglob("*.py"):
            if path.name == Path(__file__).name:
                continue
            branches += len(_FRAMEWORK_BRANCH.findall(path.read_text()))
    names = subprocess.run(
        [sys.executable, "-c", "import conformal_rag_plugins as p; print(len(getattr(p, '__all__', [])))"],
        cwd=root, capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root), "PATH": ""},
    )  # fmt: skip
    total_modules = sum(p["modules"] for p in packages.values())
    total_lines = sum(p["lines"] for p in packages.values())
    return {
        "packages": packages,
        "total_modules": total_modules,
        "total_lines": total_lines,
        "total_code_lines": sum(p["code_lines"] for p in packages.values()),
        "adapter_overlap": _adapter_overlap(package),
        "functions_over_8_parameters": len(wide),
        "public_functions_over_8_parameters": sum(w["public"] for w in wide),
        "functions_15_or_more_parameters": sum(w["parameters"] >= 15 for w in wide),
        "wide_functions": sorted(wide, key=lambda w: -w["parameters"]),
        "top_level_public_names": int(names.stdout),
        "all_entries_in_every_module": all_entries,
        "framework_eq_branches": branches,
    }


def markdown(result: dict, label: str) -> str:
    lines = [
        f"# Codebase shape ({label})",
        "",
        "| package | modules | lines | code lines |",
        "|---|---|---|---|",
    ]
    for name, p in sorted(result["packages"].items()):
        lines.append(f"| `{name}` | {p['modules']} | {p['lines']:,} | {p['code_lines']:,} |")
    lines.append(
        f"| **total** | {result['total_modules']} | {result['total_lines']:,} | {result['total_code_lines']:,} |"
    )
    overlap = result["adapter_overlap"]
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
        f"| file names in both adapters | {overlap['shared_file_names']} |",
        f"| identical lines across them (of {overlap['lines_in_shared_names']:,}) | {overlap['identical_lines']:,} |",
        "",
        "Command: `python benchmarks/codebase_shape.py --label " + label + "`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="now", help="suffix of the result files (default: now)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    args = parser.parse_args(argv)
    result = measure(args.root.resolve())
    out = ROOT / "benchmarks" / "results"
    (out / f"codebase_shape_{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"codebase_shape_{args.label}.md").write_text(markdown(result, args.label))
    print(markdown(result, args.label))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
