"""The example notebooks run offline, top to bottom, as a user would run them (nbclient)."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOKS = ["llamaindex_text_folder_to_answer_sets.ipynb", "langchain_text_folder_to_answer_sets.ipynb"]


def _text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_committed_without_outputs(name: str) -> None:
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


#: What a reader may import from the library: the package, the two adapters and the offline kit.
PUBLIC_MODULES = (
    "conformal_rag_plugins",
    "conformal_rag_plugins.llamaindex",
    "conformal_rag_plugins.langchain",
    "conformal_rag_plugins.local",
)


def library_imports(source: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every import of the library in ``source`` (``name`` None for ``import m``)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "conformal_rag_plugins"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "conformal_rag_plugins":
            found += [(node.module, a.name) for a in node.names]
    return found


def private_imports(source: str) -> list[str]:
    """The library imports of ``source`` that are not public: another module, or a name outside its ``__all__``."""
    bad = []
    for module, name in library_imports(source):
        if module not in PUBLIC_MODULES:
            bad.append(module if name is None else f"{module}.{name}")
        elif name is not None and (name == "*" or name not in importlib.import_module(module).__all__):
            bad.append(f"{module}.{name}")
    return bad


def test_private_imports_are_found() -> None:
    source = (
        "import conformal_rag_plugins\n"
        "from conformal_rag_plugins import SamplingOptions, save_examples\n"
        "from conformal_rag_plugins.local import write_bundled_articles\n"
        "from conformal_rag_plugins.local import corpus\n"
        "from conformal_rag_plugins.answer_sets.sample_cache import SampleCache\n"
        "import conformal_rag_plugins.report.notebook\n"
        "if True:\n    from conformal_rag_plugins.local.chroma import chroma_client\n"
    )
    assert private_imports(source) == [
        "conformal_rag_plugins.local.corpus",
        "conformal_rag_plugins.answer_sets.sample_cache.SampleCache",
        "conformal_rag_plugins.report.notebook",
        "conformal_rag_plugins.local.chroma.chroma_client",
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.ipynb")))
def test_notebook_imports_only_public_names(name: str) -> None:
    """A reader copies the notebook's cells into an app: every library name they import is public."""
    cells = json.loads((EXAMPLES / name).read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert code
    bad = {i: private_imports(src) for i, src in enumerate(code) if private_imports(src)}
    assert not bad, f"{name}: private imports by code cell: {bad}"


@pytest.mark.integration
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_from_text_files_to_answer_sets(name: str, tmp_path: Path) -> None:
    """The notebook, run top to bottom in a fresh directory as a reader would, walks the whole user path.

    Real parts, nothing faked: MiniLM embeddings, the framework's vector store, the bundled Gemma 3 270M
    through llama.cpp (writer, judge, sampler), BM25, on the notebook's own demo size (five bundled
    articles, 16 requested questions, 3 samples per chunk). What it claims, and the assertion that checks it:

    - a text folder becomes chunks in an index (``5 files -> ``);
    - the small base model writes at least half of the requested calibration questions
      (``generated k of 16``, k >= 8; fails if parsing, filtering or the passage window breaks the yield);
    - the LLM judge labels them (``labelled n questions``);
    - the tuned hybrid retriever calibrates at the notebook's level (``split alpha=0.2``: fails if the
      threshold is out of reach for the questions kept);
    - the answer sets calibrate end to end within the model's reach (the Bonferroni line: fails on
      ``UnreachableTargetError`` or a changed split);
    - both synthesizers answer through the framework's own engine or chain (``answer:``, ``rounds ``);
    - every file the notebook says it writes is there (labels, both calibrations, sample cache, figure).
    """
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    out = _text(nb)
    assert "5 files -> " in out
    generated = re.search(r"generated (\d+) of 16 requested questions", out)
    assert generated and int(generated.group(1)) >= 8, out[-3000:]
    assert re.search(r"labelled \d+ questions", out)
    assert "split alpha=0.2" in out, out[-3000:]
    assert re.search(r"bonferroni alpha=0\.6 \(retrieval 0\.2, generation 0\.4\)", out), out[-3000:]
    assert "answer:" in out and "rounds " in out
    written_files = ("labelled.jsonl", "retrieval_calibration.json", "answer_set_calibration.json", "samples.sqlite")
    for written in (*written_files, "calibration_scores.png"):
        assert (tmp_path / "conformal_rag_notebook" / written).is_file()
