"""``generate-calibration --passage-sentences K``: the command line's ``QuestionOptions(passage_sentences=K)``.

A fake LLM writes the questions (no Gemma), so these run in the fast tier.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import CompletionResponse, MockLLM

from conformal_rag_plugins.cli import _parser, main
from conformal_rag_plugins.commands import calibration_inputs, generate
from conformal_rag_plugins.commands.generate import GenerateRequest, run_generate
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.datasets.examples import load_examples
from conformal_rag_plugins.labelling.options import QuestionOptions
from conformal_rag_plugins.langchain import framework as lc_framework
from conformal_rag_plugins.llamaindex import framework as li_framework
from conformal_rag_plugins.llamaindex import generate_calibration_questions

#: Five documents of five short sentences each: one chunk per document, longer than any window below.
DOCUMENTS = {
    f"doc{d}": " ".join(f"Sentence {s} of document {d} names the place Town{d}{s}." for s in range(5)) for d in range(5)
}
_PASSAGE = re.compile(r"Passage: (.*)\n")


class RecordingLLM(MockLLM):
    """Asks for the passage's last word (it is in the chunk, so every output is kept); records each prompt."""

    _prompts: list[str] = PrivateAttr(default_factory=list)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        words = _PASSAGE.findall(prompt)[-1].rstrip(".").split()
        question = {"question": f"Which place ends the passage starting {words[0]} {words[1]}?", "answer": words[-1]}
        return CompletionResponse(text=" " + json.dumps(question) + "\n\nPassage: more")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.complete(prompt, formatted, **kwargs)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in DOCUMENTS.items()), encoding="utf-8")
    return path


@pytest.fixture
def llms(monkeypatch, tmp_path) -> list[RecordingLLM]:
    """Every LLM the command builds (a :class:`RecordingLLM`, in order)."""
    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    built: list[RecordingLLM] = []

    def build(framework: str, kind: str, *, temperature: float, max_tokens: int) -> RecordingLLM:
        built.append(RecordingLLM())
        return built[-1]

    monkeypatch.setattr(calibration_inputs, "build_llm", build)
    return built


def _generate(corpus: Path, out: Path, *extra: str) -> list[str]:
    return ["generate-calibration", "--corpus", str(corpus), "--n", "4", "--seed", "3", "--no-cache", "--quiet",
            "--out", str(out), *extra]  # fmt: skip


def _passages(prompts: list[str]) -> list[str]:
    return [_PASSAGE.findall(p)[-1] for p in prompts]


def test_the_flag_writes_the_same_prompts_and_questions_as_the_python_option(tmp_path, corpus, llms, capsys) -> None:
    out = tmp_path / "questions.jsonl"
    assert main(_generate(corpus, out, "--passage-sentences", "2")) == 0, capsys.readouterr().err
    (cli_llm,) = llms
    cli_examples = load_examples(out)

    # the Python option on the same chunks, seed and call order (the command uses max_concurrency=1 for --llm local)
    chunks = calibration_inputs.load_chunks("llamaindex", [corpus], None)
    python_llm = RecordingLLM()
    options = QuestionOptions(max_concurrency=1, passage_sentences=2)
    examples, report = generate_calibration_questions(chunks, python_llm, 4, seed=3, cache=False, options=options)

    assert report.n_generated == 4 and len(cli_llm._prompts) == 4
    assert cli_llm._prompts == python_llm._prompts
    as_rows = [(ex.question, ex.answers, ex.gold_ids) for ex in examples]
    assert [(ex.question, ex.answers, ex.gold_ids) for ex in cli_examples] == as_rows
    # the LLM saw two sentences of its chunk, not the chunk
    for passage, ex in zip(_passages(cli_llm._prompts), cli_examples, strict=True):
        assert len(re.findall(r"\.(?:\s|$)", passage)) == 2 and passage in DOCUMENTS[ex.gold_ids[0]]


def test_without_the_flag_the_llm_sees_whole_chunks(tmp_path, corpus, llms, capsys) -> None:
    assert main(_generate(corpus, tmp_path / "whole.jsonl")) == 0, capsys.readouterr().err
    assert main(_generate(corpus, tmp_path / "window.jsonl", "--passage-sentences", "1")) == 0
    whole, window = (_passages(llm._prompts) for llm in llms)
    assert set(whole) <= set(DOCUMENTS.values())  # every prompt holds a whole chunk
    assert all(p not in DOCUMENTS.values() and p.count(".") == 1 for p in window)


def test_the_default_leaves_the_request_and_the_options_unchanged(tmp_path, corpus, monkeypatch, llms) -> None:
    requests: list[GenerateRequest] = []
    monkeypatch.setattr(generate, "run_generate", lambda request: requests.append(request) or _Report())
    out = tmp_path / "q.jsonl"
    assert main(_generate(corpus, out)) == 0
    assert main(_generate(corpus, out, "--passage-sentences", "3")) == 0
    before = GenerateRequest(corpus=[str(corpus)], docs=None, n=4, out=str(out), seed=3, cache=False, progress=False)
    assert requests == [before, GenerateRequest(**{**before.__dict__, "passage_sentences": 3})]


class _Report:
    """A generation report of a run that kept no question."""

    n_generated, n_chunks_tried, rejected = 0, 0, {}

    def summary(self) -> str:
        return "generated 0"


@pytest.mark.parametrize("framework", [li_framework, lc_framework], ids=["llamaindex", "langchain"])
@pytest.mark.parametrize("given", [None, "3"])
def test_the_flag_reaches_question_options(tmp_path, corpus, monkeypatch, llms, framework, given) -> None:
    """What each adapter's ``generate_calibration_questions`` receives: the options of before, plus the window."""
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(framework, "generate_calibration_questions", lambda *a, **k: seen.append(k) or ([], _Report()))
    name = "llamaindex" if framework is li_framework else "langchain"
    argv = _generate(corpus, tmp_path / "q.jsonl", "--framework", name)
    assert main([*argv, *(() if given is None else ("--passage-sentences", given))]) == 2  # no question: no file
    (kwargs,) = seen
    expected = QuestionOptions(max_retries=2, max_concurrency=1, progress=False)  # what the command passed before
    if given is not None:
        expected = QuestionOptions(max_retries=2, max_concurrency=1, progress=False, passage_sentences=int(given))
    assert kwargs["options"] == expected and kwargs["seed"] == 3


@pytest.mark.parametrize("bad", ["0", "-1", "-5", "abc", "2.5", "", "1e3"])
def test_a_bad_value_is_one_line_exit_2_and_no_file(tmp_path, corpus, llms, capsys, bad) -> None:
    out = tmp_path / "q.jsonl"
    code = main(_generate(corpus, out, "--passage-sentences", bad))
    captured = capsys.readouterr()
    assert code == 2, (captured.out, captured.err)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("conformal-rag: error: --passage-sentences must be an integer >= 1, got "), lines[0]
    assert "usage:" not in captured.err and "Traceback" not in captured.err
    assert not out.exists() and llms == []  # refused before the LLM was built


@pytest.mark.parametrize("bad", [0, -2, True, 2.0])
def test_run_generate_refuses_a_bad_window_before_reading_the_corpus(tmp_path, llms, bad) -> None:
    out = tmp_path / "q.jsonl"
    request = GenerateRequest([str(tmp_path / "missing.jsonl")], None, n=1, out=out, passage_sentences=bad)
    with pytest.raises(ConformalError, match="--passage-sentences must be an integer >= 1"):
        run_generate(request)
    assert not out.exists() and llms == []


def test_help_lists_the_flag_and_its_default() -> None:
    (sub,) = [a for a in _parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict)]
    text = " ".join(sub.choices["generate-calibration"].format_help().split())
    assert "--passage-sentences K" in text and "(default: none, the whole chunk)" in text
