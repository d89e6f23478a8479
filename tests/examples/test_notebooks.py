"""The example notebooks run offline, top to bottom, as a user would run them (nbclient)."""

from __future__ import annotations

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


@pytest.mark.integration
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_from_text_files_to_answer_sets(name: str, tmp_path: Path) -> None:
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
    written_files = ("labelled.jsonl", "retrieval_calibration.json", "answer_set_calibration.json")
    for written in (*written_files, "calibration_scores.png"):
        assert (tmp_path / "conformal_rag_notebook" / written).is_file()
