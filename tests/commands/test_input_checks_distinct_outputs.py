"""Two output options of one command naming the same path are refused before any work (issue 21 part 4).

Before, ``monitor --json X --save-monitor X`` wrote the report over the monitor state (or the
other way round), ``calibrate --out X --persist-dir X`` put the calibration where Chroma keeps
its store, and ``label``/``generate-calibration --out X --cache X`` wrote the questions over
the SQLite cache of LLM outputs, each without a word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import calibration_inputs, input_checks
from conformal_rag_plugins.core.errors import ConformalError


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"id": "a", "text": "The Seine flows through Paris."}])
    question = {"id": "q1", "question": "Which river flows through Paris?", "answers": ["Seine"]}
    return {
        "corpus": corpus,
        "questions": _jsonl(tmp_path / "labelled.jsonl", [{**question, "gold_ids": ["a"]}]),
        "qa": _jsonl(tmp_path / "qa.jsonl", [{**question, "context_id": "a", "is_impossible": False}]),
        "stream": _jsonl(tmp_path / "stream.jsonl", [{"question": "Which river?"}]),
    }


@pytest.fixture(autouse=True)
def no_work(monkeypatch, tmp_path):
    """Tripwires on the first step of every command's work: reading its inputs."""
    from conformal_rag_plugins.datasets import examples

    def tripwire(*args, **kwargs):
        raise AssertionError("the command read its inputs before refusing its outputs")

    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration_inputs, "load_chunks", tripwire)
    monkeypatch.setattr(calibration_inputs, "build_llm", tripwire)
    monkeypatch.setattr(input_checks, "load_questions", tripwire)
    monkeypatch.setattr(input_checks, "read_questions", tripwire)
    monkeypatch.setattr(examples, "load_corpus", tripwire)


FLAGS = {
    "calibrate": ("--out", "--persist-dir"),
    "monitor": ("--json", "--save-monitor"),
    "label": ("--out", "--cache"),
    "generate-calibration": ("--out", "--cache"),
}


def _argv(command: str, inputs: dict[str, Path], first: Path, second: Path) -> list[str]:
    corpus, questions = inputs["corpus"], inputs["questions"]
    first_flag, second_flag = FLAGS[command]
    reads = {
        "calibrate": ["--corpus", corpus, "--questions", questions],
        "monitor": ["--corpus", corpus, "--qa", inputs["qa"], "--stream", inputs["stream"]],
        "label": ["--corpus", corpus, "--questions", questions],
        "generate-calibration": ["--corpus", corpus, "--n", "1"],
    }[command]
    argv = [command, *reads, first_flag, first, second_flag, second]
    return [str(a) for a in argv]


@pytest.mark.parametrize("command", sorted(FLAGS))
@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
def test_two_outputs_naming_one_path_are_refused(tmp_path, inputs, capsys, command, spelling) -> None:
    out = tmp_path / "out.json"
    second = {
        "same": out,
        "dotted": tmp_path / "sub" / ".." / "out.json",
        "symlink": tmp_path / "link.json",
    }[spelling]
    (tmp_path / "sub").mkdir()
    if spelling == "symlink":
        second.symlink_to(out)
    code = main(_argv(command, inputs, out, second))
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    first_flag, second_flag = FLAGS[command]
    assert lines[0].startswith(f"conformal-rag: error: {first_flag} and {second_flag} both name "), lines[0]
    assert not out.exists()  # refused before anything was written


def test_distinct_outputs_pass_and_in_memory_caches_are_skipped(tmp_path) -> None:
    input_checks.check_distinct_outputs({"--json": tmp_path / "a.json", "--save-monitor": tmp_path / "b.json"})
    input_checks.check_distinct_outputs({"--json": tmp_path / "a.json", "--save-monitor": None})
    input_checks.check_distinct_outputs({"--out": ":memory:", "--cache": ":memory:"})
    input_checks.check_distinct_outputs({"--out": tmp_path / "a.json", "--cache": True})
    with pytest.raises(ConformalError, match="--out and --cache both name"):
        input_checks.check_distinct_outputs({"--out": tmp_path / "a.json", "--cache": str(tmp_path / "a.json")})
