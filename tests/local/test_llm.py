"""The local model is started in a child process first: a native crash becomes a clear error, not a dead process."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.local import llm as local_llm_module
from conformal_rag_plugins.local.llm import LocalModelError, check_local_model, llama_cpp_version


@pytest.fixture
def fresh_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_llm_module, "_checked", {})


def test_a_crash_in_the_child_names_the_model_the_version_and_the_signal(
    fresh_check: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_llm_module, "_CHECK_SCRIPT", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(LocalModelError) as err:
        check_local_model(tmp_path / "gemma-3-270m-q4_k_m.gguf")
    message = str(err.value)
    assert "gemma-3-270m-q4_k_m.gguf" in message and "SIGSEGV" in message
    assert f"llama-cpp-python {llama_cpp_version()}" in message
    assert "0.3.16" in message  # the advice names the checked version


def test_a_failure_in_the_child_gives_its_last_line(
    fresh_check: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_llm_module, "_CHECK_SCRIPT", "raise SystemExit('model file is truncated')")
    with pytest.raises(LocalModelError, match="failed to start: model file is truncated"):
        check_local_model(tmp_path / "model.gguf")


def test_a_working_model_is_checked_once_per_process(
    fresh_check: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    monkeypatch.setattr(local_llm_module, "_CHECK_SCRIPT", f"open({str(calls)!r}, 'a').write('x')")
    first = check_local_model(tmp_path / "model.gguf")
    second = check_local_model(tmp_path / "model.gguf")
    assert first == second == f"model.gguf with llama-cpp-python {llama_cpp_version()}"
    assert calls.read_text() == "x"


def test_the_cli_reports_a_crashing_local_model_in_one_line_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def crashing_demo(request: object) -> None:
        raise LocalModelError(
            f"The local model gemma-3-270m-q4_k_m.gguf with llama-cpp-python 0.3.36 crashed with "
            f"{signal.Signals.SIGSEGV.name} on its first completion\n(native llama.cpp code)"
        )

    monkeypatch.setattr("conformal_rag_plugins.commands.demo.run_demo", crashing_demo)
    assert main(["demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("conformal-rag: error: The local model gemma-3-270m-q4_k_m.gguf")
    assert "SIGSEGV" in err[0]
