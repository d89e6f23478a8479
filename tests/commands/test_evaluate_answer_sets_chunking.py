"""``evaluate --answers`` chunks long entries as ``evaluate`` does (issue 34: it indexed whole passages).

No model runs: the host is a word-overlap fake over the entries it is given (captured here), and
the LLM is LlamaIndex's ``MockLLM``; the MiniLM tokenizer chunks, as in production.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/commands/answer_sample_rows.py

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import evaluate_answer_sets
from conformal_rag_plugins.commands.hosts import HostBundle
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool

TOPICS = {
    "normans": ("Normandy", "Rollo", "Hastings", "William"),
    "seine": ("Paris", "Rouen", "Le Havre", "Troyes"),
    "vikings": ("longships", "Lindisfarne", "Dublin", "Kiev"),
}


def _document(topic: str, facts: tuple[str, ...]) -> str:
    """A long passage (about 600 word pieces): filler sentences with one fact sentence in each quarter."""
    sentences = []
    for k, fact in enumerate(facts):
        sentences += [f"The {topic} chronicle, book {k}, line {j}, repeats older accounts at length." for j in range(8)]
        sentences.append(f"In the {topic} record number {k} the key name is {fact}.")
    return " ".join(sentences)


def _write_inputs(tmp_path: Path) -> tuple[Path, Path, int]:
    corpus = [{"id": topic, "text": _document(topic, facts), "title": topic} for topic, facts in TOPICS.items()]
    qa = [
        {"id": f"{topic}-{k}", "question": f"What is the key name in the {topic} record number {k}?",
         "answers": [fact], "context_id": topic, "is_impossible": False}
        for topic, facts in TOPICS.items() for k, fact in enumerate(facts)
    ]  # fmt: skip
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa), encoding="utf-8")
    assert min(count_tokens(r["text"]) for r in corpus) > 254  # every entry is past MiniLM's window
    return tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl", len(qa)


@pytest.fixture
def indexed(monkeypatch, tmp_path) -> dict:
    """Capture what ``evaluate --answers`` indexes; answer with ``MockLLM``; nothing real is loaded."""
    from llama_index.core.llms import MockLLM

    seen: dict = {}

    def fake_host(framework, kind, entries, *, pool_size=50, **_):
        seen["entries"] = list(entries)

        def fetch(question: str) -> CandidatePool:
            words = set(re.findall(r"\w+", question.lower()))
            scores = [len(words & set(re.findall(r"\w+", e.text.lower()))) / 100 for e in entries]
            return CandidatePool.from_unsorted([e.id for e in entries], [e.text for e in entries], scores)

        return HostBundle(framework, kind, None, pool_size, fetch, None)

    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate_answer_sets, "build_host", fake_host)
    monkeypatch.setattr(evaluate_answer_sets, "_llm", lambda kind, logprobs=False: MockLLM(max_tokens=2))
    return seen


def _run(tmp_path: Path, *extra: str) -> dict:
    corpus, qa, _ = _write_inputs(tmp_path)
    out = tmp_path / "out.json"
    argv = ["evaluate", "--answers", "--corpus", str(corpus), "--qa", str(qa), "--alpha", "0.5", "--trials", "1"]
    argv += ["--samples", "2", "--answer-pool", "3", "--json", str(out), *extra]
    assert main(argv) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_evaluate_answers_chunks_long_entries_and_moves_the_gold_as_evaluate_does(indexed, tmp_path, capsys) -> None:
    report = _run(tmp_path, "--chunk-size", "100", "--chunk-overlap", "10")
    ids = [e.id for e in indexed["entries"]]
    assert len(ids) > len(TOPICS) and all("::chunk" in i for i in ids), ids
    assert max(count_tokens(e.text) for e in indexed["entries"]) <= 100  # the chunk options are read
    chunking = report["chunking"]
    assert chunking["n_entries"] == len(TOPICS) and chunking["n_split_entries"] == len(TOPICS)
    assert chunking["n_chunks"] == report["n_corpus"] == len(ids)
    assert chunking["chunk_size"] == 100 and chunking["chunk_overlap"] == 10
    n_questions = sum(len(f) for f in TOPICS.values())
    assert chunking["gold"]["n_answer_in_chunk"] == n_questions  # each gold document -> the chunk holding the answer
    captured = capsys.readouterr()
    assert f"chunking: {len(TOPICS)} entries -> {len(ids)} chunks" in captured.out
    assert "ignores" not in captured.err  # --chunk-size/--chunk-overlap are not reported as ignored


def test_evaluate_answers_with_no_chunking_indexes_entries_whole(indexed, tmp_path) -> None:
    report = _run(tmp_path, "--no-chunking")
    assert report["chunking"] is None and report["n_corpus"] == len(TOPICS)
    assert [e.id for e in indexed["entries"]] == list(TOPICS)
