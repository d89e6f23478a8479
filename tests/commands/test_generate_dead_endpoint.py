"""Issue 33 item 6: ``generate-calibration`` against an unreachable LLM server, or one whose outputs are all refused.

Before the fix the command retried every chunk (203 s on the reporter's machine), printed
``wrote 0 questions`` and exited 0, leaving a 0-byte questions file. Now it fails at the first
call that fails before any was answered: exit 2, one error line, no output file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import calibration_inputs

PASSAGES = [f"Document {i} says the Normans founded Normandy in the year {900 + i} under Rollo." for i in range(6)]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(PASSAGES)))
    return path


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# integration: a child process with the real HTTP client and its retries and back-off (about 7 s each)
@pytest.mark.integration
@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_an_unreachable_server_fails_fast_with_one_line_and_no_file(tmp_path, corpus, framework) -> None:
    out = tmp_path / "questions.jsonl"
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1",
        "OPENAI_API_KEY": "sk-test",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    env.pop("CONFORMAL_RAG_OPENAI_COMPLETION", None)
    argv = [sys.executable, "-m", "conformal_rag_plugins.cli", "generate-calibration", "--corpus", str(corpus)]
    argv += ["--n", "3", "--llm", "openai", "--framework", framework, "--no-cache", "--quiet", "--out", str(out)]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180, check=False)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("conformal-rag: error: The LLM ") and "did not answer" in lines[0], lines[0]
    assert "Connection" in lines[0]  # the provider's reason
    assert not out.exists() and list(tmp_path.iterdir()) == [corpus]  # no output, no 0-byte or temporary file
    assert elapsed < 90, elapsed  # one call and its retries, not every chunk's


def test_a_run_that_keeps_no_question_writes_nothing(tmp_path, corpus, capsys, monkeypatch) -> None:
    """The LLM answers, but every output is refused: exit 2 naming the reasons, no empty questions file."""
    from llama_index.core.llms import MockLLM

    monkeypatch.setattr(calibration_inputs, "build_llm", lambda *a, **k: MockLLM(max_tokens=4))
    out = tmp_path / "questions.jsonl"
    argv = ["generate-calibration", "--corpus", corpus, "--n", "2", "--no-cache", "--quiet", "--out", out]
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, (captured.out, captured.err)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("conformal-rag: error: No question was generated"), captured.err
    assert "not_json" in lines[0] and "was not written" in lines[0]
    assert not out.exists()
