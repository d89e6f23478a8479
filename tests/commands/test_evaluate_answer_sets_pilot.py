"""Issue 34: ``evaluate --answers`` samples a small pilot first and stops (exit 2) when the target is out of reach.

The host and the LLM are fakes (no index, no Gemma): the host's pool always holds the gold passage,
and the LLM answers ``wrong`` (never a reference) or ``right`` (copies the passage's answer).
Before the pilot, the unreachable case sampled every pool chunk of every question.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/commands/answer_sample_rows.py
#   conformal_rag_plugins/commands/tables.py
#   conformal_rag_plugins/runtime/paths.py

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import evaluate_answer_sets
from conformal_rag_plugins.commands.hosts import HostBundle
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool

N = 30


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def world(tmp_path, monkeypatch):
    from llama_index.core.llms import MockLLM

    texts = {f"p{i}": f"Passage {i}: the answer is word{i}." for i in range(N)}
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"id": k, "text": t} for k, t in texts.items()])
    rows = [
        {"id": f"q{i}", "question": f"What is the answer {i}?", "answers": [f"word{i}"], "gold_ids": [f"p{i}"]}
        for i in range(N)
    ]
    qa = _jsonl(tmp_path / "qa.jsonl", rows)

    def fetch(question: str) -> CandidatePool:
        i = int(question.rstrip("?").split()[-1])
        ids = [f"p{i}", f"p{(i + 1) % N}", f"p{(i + 2) % N}"]
        return CandidatePool.from_unsorted(ids, [texts[c] for c in ids], [0.9, 0.5, 0.4])

    class FakeLLM(MockLLM):
        calls: ClassVar[list[str]] = []
        mode: ClassVar[str] = "wrong"

        def _generate_text(self, length: int) -> str:
            self.calls.append(self.mode)
            return "nothing"

    FakeLLM.calls = []

    def fake_complete(self: Any, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        from llama_index.core.base.llms.types import CompletionResponse

        FakeLLM.calls.append(prompt)
        passage = prompt.rsplit("Passage ", 1)[-1] if FakeLLM.mode == "right" else ""
        word = passage.split("answer is ", 1)[-1].split(".", 1)[0] if passage else "nothing"
        return CompletionResponse(text=word)

    async def fake_acomplete(self: Any, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        return fake_complete(self, prompt, formatted, **kw)

    monkeypatch.setattr(FakeLLM, "complete", fake_complete, raising=False)
    monkeypatch.setattr(FakeLLM, "acomplete", fake_acomplete, raising=False)
    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate_answer_sets, "METHODS", ("bonferroni", "hmp"))  # no Bayesian optimisation: fast
    monkeypatch.setattr(
        evaluate_answer_sets,
        "build_host",
        lambda *a, **k: HostBundle("llamaindex", "hybrid", None, 50, fetch),
    )
    monkeypatch.setattr(evaluate_answer_sets, "_llm", lambda kind, logprobs=False: FakeLLM(max_tokens=4))
    return {"corpus": corpus, "qa": qa, "llm": FakeLLM, "out": tmp_path / "out.json"}


def _argv(world, *extra: str) -> list[str]:
    return [
        "evaluate", "--corpus", str(world["corpus"]), "--qa", str(world["qa"]), "--answers",
        "--confidence-level", "0.8", "--samples", "2", "--answer-pool", "3", "--trials", "2",
        "--json", str(world["out"]), *extra,
    ]  # fmt: skip


def test_an_unreachable_target_exits_2_after_the_pilot_only(world, capsys) -> None:
    code = main(_argv(world))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    pilot_lines = [line for line in err if "pilot:" in line]
    assert pilot_lines[0].startswith("conformal-rag: pilot: a correct answer among the samples on 0 of 5")
    # issue 41: the flag rule's need (METHODS patched to bonferroni and hmp: hmp on half of the 25 questions),
    # not 1 - alpha = 0.80 of an optimised split the run does not evaluate
    assert "needs 1.00 (hmp, weight 0.5; flag rule 'pool-miss-2': alpha_gen 0.15" in pilot_lines[0]
    assert "at most 0 misses of 12" in pilot_lines[0]
    assert "reachable: confidence_level none at the upper bound (none at the estimate)" in pilot_lines[0]
    reach = [line for line in err if "generator reach under rule" in line]
    assert len(reach) == 1 and "confidence_level 0.8 (alpha_gen 0.15" in reach[0]
    assert reach[0].endswith("a ceiling of 0.00 reaches no confidence level")
    assert err[-1].startswith("conformal-rag: error: The target is out of reach")
    assert "upper bound 0.45" in err[-1] and "--no-pilot" in err[-1] and "--confidence-level" in err[-1]
    assert len(world["llm"].calls) == 5 * 2  # five pilot questions, their gold chunk only, M = 2
    assert not world["out"].exists()


def test_no_pilot_is_the_old_behaviour(world, capsys) -> None:
    code = main(_argv(world, "--no-pilot"))
    assert code == 0, capsys.readouterr().err
    report = json.loads(world["out"].read_text())
    assert report["n_questions"] == N and "pilot" not in report
    assert len(world["llm"].calls) == N * 3 * 2  # every pool chunk of every question
    err = capsys.readouterr().err
    assert "pilot:" not in err
    assert "conformal-rag: generator reach under rule 'pool-miss-2': confidence_level 0.8" in err  # said up front


def test_a_reachable_target_goes_on_without_the_pilot_questions(world, capsys) -> None:
    world["llm"].mode = "right"
    code = main(_argv(world, "--pilot", "4"))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "conformal-rag: pilot: a correct answer among the samples on 4 of 4 questions" in err
    report = json.loads(world["out"].read_text())
    assert report["pilot"]["n_questions"] == 4 and report["pilot"]["n_hits"] == 4
    assert report["n_questions"] == N - 4  # the pilot questions are not evaluated
    assert report["coverage_ceiling"] == 1.0 and report["results"]  # the old fields are still there


def test_a_negative_pilot_is_refused(world, capsys) -> None:
    assert main(_argv(world, "--pilot", "-1")) == 2
    assert "pilot" in capsys.readouterr().err
    assert world["llm"].calls == []
