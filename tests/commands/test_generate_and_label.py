"""``conformal-rag generate-calibration`` and ``label`` end to end, with a fake LLM instead of Gemma."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/commands/label.py
#   conformal_rag_plugins/datasets/text_folder.py
#   conformal_rag_plugins/langchain/llm_calls.py
#   conformal_rag_plugins/llamaindex/llm_calls.py
#   conformal_rag_plugins/runtime/paths.py

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain_core.language_models.llms import LLM
from llama_index.core.llms import CompletionResponse, MockLLM

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import calibration_inputs
from conformal_rag_plugins.datasets.examples import load_examples

ENTRIES = [
    ("normans", "The Normans gave their name to Normandy, a region in northern France."),
    ("rollo", "Rollo was the Viking leader who founded the duchy of Normandy in 911."),
    ("seine", "The Seine is a river that flows through Paris into the English Channel."),
    ("hastings", "At the Battle of Hastings in 1066 the Normans defeated the English army."),
]


class FakeLLM(MockLLM):
    """Asks for the passage's last word; as a judge, says yes when the answer is in the passage."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if prompt.rstrip().endswith("Contains the answer:"):
            passage = re.findall(r"Passage: (.*)\n", prompt)[-1]
            answer = re.findall(r"Answer: (.*)\n", prompt)[-1]
            return CompletionResponse(text=" yes" if answer.lower() in passage.lower() else " no")
        passage = re.findall(r"Passage: (.*)\n", prompt)[-1]
        words = passage.rstrip(".").split()
        question = {"question": f"What is the last word of the text starting {words[0]} {words[1]}?"}
        question["answer"] = words[-1]
        return CompletionResponse(text=" " + json.dumps(question) + "\n\nPassage: more")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.complete(prompt, formatted, **kwargs)


class FakeLangChainLLM(LLM):
    """The same fake as a LangChain completion model."""

    @property
    def _llm_type(self) -> str:
        return "fake"

    def _call(self, prompt: str, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        return FakeLLM().complete(prompt).text


@pytest.fixture
def fake_llm(monkeypatch, tmp_path):
    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    calls: list[tuple[str, str, float]] = []

    def build(framework: str, kind: str, *, temperature: float, max_tokens: int) -> Any:
        calls.append((framework, kind, temperature))
        return FakeLLM() if framework == "llamaindex" else FakeLangChainLLM()

    monkeypatch.setattr(calibration_inputs, "build_llm", build)
    return calls


@pytest.fixture
def bm25_host(monkeypatch):
    """``build_host`` without embeddings (a LlamaIndex BM25 retriever), so the test needs no MiniLM or Chroma."""
    from llama_index.retrievers.bm25 import BM25Retriever

    from conformal_rag_plugins.commands import hosts
    from conformal_rag_plugins.llamaindex.host import pool_from_nodes
    from conformal_rag_plugins.local.llamaindex_stack import nodes_from_entries

    requests: list[tuple[str, str, int]] = []

    def build(framework: str, kind: str, entries: Any, *, pool_size: int = 50, **kwargs: Any) -> hosts.HostBundle:
        requests.append((framework, kind, pool_size))
        host = BM25Retriever.from_defaults(nodes=nodes_from_entries(entries), similarity_top_k=pool_size)
        return hosts.HostBundle(framework, kind, host, pool_size, lambda q: pool_from_nodes(host.retrieve(q))[0])

    monkeypatch.setattr(hosts, "build_host", build)
    return requests


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in ENTRIES), encoding="utf-8")
    return path


def test_generate_then_label_end_to_end(tmp_path, corpus, fake_llm, bm25_host, capsys) -> None:
    questions, labelled = tmp_path / "questions.jsonl", tmp_path / "labelled.jsonl"
    code = main(["generate-calibration", "--corpus", str(corpus), "--n", "3", "--seed", "1", "--topic", "history",
                 "--out", str(questions), "--quiet"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "generated 3 of 3 requested questions" in out and f"wrote 3 questions to {questions}" in out
    examples = load_examples(questions)
    assert len(examples) == 3 and all(ex.gold_ids[0] in dict(ENTRIES) for ex in examples)
    assert all(ex.metadata["topic"] == "history" and ex.answers for ex in examples)
    assert fake_llm == [("llamaindex", "local", 0.7)]

    code = main(["label", "--corpus", str(corpus), "--questions", str(questions), "--out", str(labelled),
                 "--retriever", "bm25", "--pool-size", "4", "--budget", "2", "--quiet"])  # fmt: skip
    assert code == 0
    assert "labelled 3 questions" in capsys.readouterr().out
    result = load_examples(labelled)
    assert [ex.question for ex in result] == [ex.question for ex in examples]
    for ex in result:
        assert ex.metadata["label_rule"] in {"judge", "source", "budget-exhausted"}
        assert ex.gold_ids and ex.metadata["judge_budget"] == 2
    assert fake_llm[-1] == ("llamaindex", "local", 0.0)
    assert bm25_host == [("llamaindex", "bm25", 4)]

    # a re-run is served from the cache
    assert main(["generate-calibration", "--corpus", str(corpus), "--n", "3", "--seed", "1", "--topic", "history",
                 "--out", str(tmp_path / "again.jsonl"), "--quiet"]) == 0  # fmt: skip
    assert "LLM calls: 0 (plus 3 outputs reused from the cache)" in capsys.readouterr().out


def test_generate_from_a_folder_with_langchain(tmp_path, fake_llm, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in ENTRIES[:2]:
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "q.jsonl"
    code = main(["generate-calibration", "--docs", str(folder), "--n", "2", "--framework", "langchain",
                 "--no-cache", "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert sorted(ex.gold_ids[0] for ex in load_examples(out)) == ["normans.txt", "rollo.txt"]
    assert fake_llm == [("langchain", "local", 0.7)]


def test_corpus_too_small_is_exit_2_with_the_achievable_number(tmp_path, corpus, fake_llm, capsys) -> None:
    code = main(["generate-calibration", "--corpus", str(corpus), "--n", "10", "--out", str(tmp_path / "q.jsonl")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("conformal-rag: error: The corpus is too small for 10 questions")
    assert "at most 4 question(s)" in err
    assert fake_llm == []  # failed before loading the LLM
    assert not (tmp_path / "q.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--docs", "EMPTY"], "No non-empty files"),
        (["--docs", "MISSING"], "is not a folder"),
        (["--corpus", "CORPUS", "--docs", "EMPTY"], "one of them"),
        ([], "one of them"),
    ],
)
def test_bad_corpus_arguments_are_exit_2(tmp_path, corpus, fake_llm, capsys, args, message) -> None:
    (tmp_path / "empty").mkdir()
    names = {"EMPTY": str(tmp_path / "empty"), "MISSING": str(tmp_path / "missing"), "CORPUS": str(corpus)}
    argv = ["generate-calibration", *[names.get(a, a) for a in args], "--n", "1", "--out", str(tmp_path / "q.jsonl")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_label_refuses_questions_from_another_corpus(tmp_path, corpus, fake_llm, capsys) -> None:
    questions = tmp_path / "q.jsonl"
    row = {"question": "Who?", "gold_ids": ["out"], "answers": ["x"], "metadata": {"source_chunk_id": "out"}}
    questions.write_text(json.dumps(row) + "\n", encoding="utf-8")
    code = main(["label", "--corpus", str(corpus), "--questions", str(questions), "--out", str(tmp_path / "l.jsonl")])
    assert code == 2
    assert "not in this corpus" in capsys.readouterr().err and fake_llm == []


def test_label_budget_zero_keeps_existing_gold_ids(tmp_path, corpus, fake_llm, bm25_host, capsys) -> None:
    """``--budget 0`` judges nothing, so hand-labelled gold ids must come out as they went in."""
    questions, labelled = tmp_path / "q.jsonl", tmp_path / "labelled.jsonl"
    rows = [
        {"id": "q1", "question": "Who founded the duchy?", "answers": ["Rollo"], "gold_ids": ["rollo"]},
        {"id": "q2", "question": "Which river?", "answers": ["Seine"], "gold_ids": ["seine", "normans"]},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code = main(["label", "--corpus", str(corpus), "--questions", str(questions), "--out", str(labelled),
                 "--retriever", "bm25", "--pool-size", "4", "--budget", "0", "--quiet"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert [ex.gold_ids for ex in load_examples(labelled)] == [("rollo",), ("seine", "normans")]
