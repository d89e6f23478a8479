"""The documentation site's generated parts and the README front page, checked without building the site.

``make test`` runs ``mkdocs build --strict`` (broken links, anchors and API references fail it); these
tests keep what the build cannot see: the command-line reference covers every sub-command and option
of the parser, every benchmark table the docs include exists (and every user-facing one is included),
the API pages document exactly the public names, and README and docs use only public imports.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOK = DOCS / "hooks" / "cli_reference.py"
PUBLIC_MODULES = {
    "conformal_rag_plugins": ROOT / "conformal_rag_plugins" / "__init__.py",
    "conformal_rag_plugins.llamaindex": ROOT / "conformal_rag_plugins" / "llamaindex" / "__init__.py",
    "conformal_rag_plugins.langchain": ROOT / "conformal_rag_plugins" / "langchain" / "__init__.py",
    "conformal_rag_plugins.local": ROOT / "conformal_rag_plugins" / "local" / "__init__.py",
}
#: benchmark results that are about the code base, not for users (not included in the docs)
INTERNAL_RESULTS = re.compile(r"^(codebase_shape_.*|suite_times_.*|.*_before)\.md$")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', re.MULTILINE)


def _hook():
    spec = importlib.util.spec_from_file_location("cli_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _doc_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md"))


def _sections(markdown: str) -> dict[str, str]:
    """The generated reference cut at its ``## `conformal-rag ...` `` headings."""
    parts = re.split(r"^## `(conformal-rag[^`]*)`$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _public_names(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [n for n in ast.literal_eval(node.value) if not n.startswith("_")]
    raise AssertionError(f"{path} has no __all__")


def _check_reference(hook, parser: argparse.ArgumentParser) -> list[str]:
    """What the rendered reference misses of ``parser``: sub-commands, options, defaults, examples."""
    sections = _sections(hook.render(parser))
    missing = []
    for name, sub in [("", parser), *hook.sub_commands(parser).items()]:
        title = f"conformal-rag {name}".strip()
        text = sections.get(title)
        if text is None:
            missing.append(f"section {title}")
            continue
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            if action.help == argparse.SUPPRESS:  # hidden from --help too (deprecated options)
                continue
            row = next((ln for ln in text.splitlines() if ln.startswith(f"| `{action.option_strings[0]}`")), None)
            if row is None:
                missing.append(f"{title} {action.option_strings[0]}")
                continue
            missing += [f"{title} {opt}" for opt in action.option_strings if f"`{opt}`" not in row]
            if action.help and action.help.split()[0] not in row:
                missing.append(f"{title} {action.option_strings[0]}: help")
            default = action.default
            has_default = action.nargs != 0 and default not in (None, argparse.SUPPRESS) and not action.required
            if has_default and f"`{default}`" not in row and "in the text" not in row:
                missing.append(f"{title} {action.option_strings[0]}: default {default!r}")
        if sub.epilog:
            for line in sub.epilog.splitlines()[1:]:
                if line.strip() and line.strip() not in text:
                    missing.append(f"{title}: example {line.strip()}")
    return missing


def test_cli_reference_covers_every_sub_command_and_option():
    hook = _hook()
    parser = hook.build_parser()
    subs = hook.sub_commands(parser)
    assert {"demo", "evaluate", "generate-calibration", "label", "calibrate", "monitor", "report"} <= set(subs)
    assert _check_reference(hook, parser) == []
    page = hook.on_page_markdown((DOCS / "cli.md").read_text(encoding="utf-8"))
    assert hook.MARKER not in page and "## `conformal-rag evaluate`" in page


def test_cli_reference_check_fails_on_an_option_it_does_not_render():
    """Negative control: an option the renderer drops is reported by the same check."""
    hook = _hook()
    parser = hook.build_parser()
    hook.sub_commands(parser)["report"].add_argument("--brand-new", default=7, help="a new option")
    assert _check_reference(hook, parser) == []  # rendered from the parser, so it is covered
    real = hook.options
    hook.options = lambda p: [a for a in real(p) if "--brand-new" not in a.option_strings]
    try:
        assert _check_reference(hook, parser) == ["conformal-rag report --brand-new"]
    finally:
        hook.options = real


def test_every_included_file_exists_and_every_benchmark_table_is_included():
    included = set()
    for page in _doc_pages():
        for target in SNIPPET.findall(page.read_text(encoding="utf-8")):
            path = re.sub(r"(:-?\d*){1,2}$", "", target)
            assert (ROOT / path).is_file(), f"{page.relative_to(ROOT)} includes {path}, which does not exist"
            included.add(path)
    results = {
        f"benchmarks/results/{p.name}"
        for p in (ROOT / "benchmarks" / "results").glob("*.md")
        if not INTERNAL_RESULTS.match(p.name)
    }
    assert results, "no benchmark results found"
    assert sorted(results - included) == [], "benchmark results not shown in the docs"
    assert "CHANGELOG.md" in included


def test_api_pages_document_exactly_the_public_names():
    targets = set()
    for page in (DOCS / "api").glob("*.md"):
        targets |= set(re.findall(r"^::: ([\w.]+)\s*$", page.read_text(encoding="utf-8"), re.MULTILINE))
    expected = {f"{mod}.{name}" for mod, path in PUBLIC_MODULES.items() for name in _public_names(path)}
    assert sorted(expected - targets) == [], "public names without an API entry"
    assert sorted(targets - expected) == [], "API entries that are not public names (deep module paths)"


@pytest.mark.parametrize("path", [ROOT / "README.md", *_doc_pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_prose_imports_only_public_modules_and_spells_conflare_one_way(path):
    text = path.read_text(encoding="utf-8")
    if path.name == "changelog.md":
        return
    modules = re.findall(r"^\s*from (conformal_rag_plugins[\w.]*) import", text, re.MULTILINE)
    modules += re.findall(r"^\s*import (conformal_rag_plugins[\w.]*)", text, re.MULTILINE)
    assert sorted(set(modules) - set(PUBLIC_MODULES)) == []
    spellings = set(re.findall(r"conflare", text, re.IGNORECASE)) - {"CONFLARE", "conflare"}  # method, row name
    assert sorted(spellings) == []
    for phrase in (
        "the main job",
        "the design asked",
        "earlier versions",
        "this machine",
        "the previous release",
        "last session",
    ):
        assert phrase not in text.lower(), f"{path.name}: {phrase!r}"


def test_readme_is_a_front_page_with_the_two_commands_and_working_links():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "```bash\nmake demo\n```" in text and "```bash\nmake test\n```" in text
    for cls in ("ConformalNodePostprocessor", "ConformalDocumentCompressor", "ConformalRetriever"):
        assert cls in text
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert links, "README links nowhere"
    assert [link for link in links if not (ROOT / link).exists()] == []


def _result_row(name: str, *cells: str) -> list[str]:
    for line in (ROOT / "benchmarks" / "results" / name).read_text(encoding="utf-8").splitlines():
        row = [c.strip() for c in line.strip("|").split("|")]
        if row[: len(cells)] == list(cells):
            return row
    raise AssertionError(f"no row {cells} in {name}")


def test_quoted_numbers_come_from_the_benchmark_results():
    """The headline numbers the README and docs quote are the ones in the result files they cite."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for framework, quoted in (("llamaindex", "**1.25 chunks**"), ("langchain", "**1.20**")):
        coverage, _, size = _result_row("retrieval.md", framework, "hybrid", "0.100", "split:relative")[4:7]
        assert quoted in readme and f"{float(size):.2f}" in quoted and f"{float(coverage):.2f}" == "0.90"
    seconds, rate = (_result_row("evaluate_scale.md", "5000")[i] for i in (2, 6))
    evaluate = (DOCS / "evaluate.md").read_text(encoding="utf-8")
    assert f"{float(seconds):.0f} s" in evaluate and f"{float(rate):.1f} questions/s" in evaluate
