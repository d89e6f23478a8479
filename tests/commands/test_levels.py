"""``--confidence-level`` beside ``--alpha`` (issue 22): two spellings of one level, never both.

``evaluate`` runs here on a BM25-only fan-out (no MiniLM, no Chroma), so the whole command,
JSON included, runs in the fast tier.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/commands/tables.py

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import _parser, main
from conformal_rag_plugins.commands import unit_candidates
from conformal_rag_plugins.local.bm25 import BM25Index
from conformal_rag_plugins.local.data import bundled_corpus_paths, bundled_qa_path
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool

#: Sub-commands that take ``--alpha``; each takes ``--confidence-level`` too.
WITH_ALPHA = {"demo", "evaluate", "calibrate", "monitor"}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_every_subcommand_with_alpha_takes_confidence_level() -> None:
    commands = _subcommands()
    assert {name for name, p in commands.items() if "--alpha" in _options(p)} == WITH_ALPHA
    for name in WITH_ALPHA:
        assert "--confidence-level" in _options(commands[name]), name
        help_text = " ".join(commands[name].format_help().split())
        assert "--confidence-level 0.9 is --alpha 0.1" in help_text, name
        assert "(default: 0.9" in help_text or name == "evaluate", name


@pytest.fixture
def small(tmp_path) -> tuple[Path, Path]:
    """The first 12 bundled paragraphs and their questions."""
    corpus, _ = bundled_corpus_paths()
    docs = corpus.read_text(encoding="utf-8").splitlines()[:12]
    keep = {json.loads(line)["id"] for line in docs}
    qa = [line for line in bundled_qa_path().read_text(encoding="utf-8").splitlines()
          if json.loads(line)["context_id"] in keep]  # fmt: skip
    (tmp_path / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text("\n".join(qa) + "\n", encoding="utf-8")
    return tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"


@pytest.fixture
def bm25_fanout(monkeypatch) -> list[str]:
    """``build_fanout`` as a BM25 index in memory: ``{(None, k): pool}`` per question, as a BM25 host gives it."""
    built: list[str] = []

    def build(framework, kind, entries, *, grid, pool_sizes, **kwargs):
        built.append(kind)
        index = BM25Index([e.id for e in entries], [e.text for e in entries])

        def fetch(question: str) -> dict:
            hits = index.search(question, max(pool_sizes))
            return {
                (None, k): CandidatePool.from_unsorted(
                    [i for i, _ in hits[:k]], [index.text_of(i) for i, _ in hits[:k]], [s for _, s in hits[:k]]
                )
                for k in pool_sizes
            }

        return fetch

    monkeypatch.setattr(unit_candidates, "build_fanout", build)
    return built


def _evaluate(small: tuple[Path, Path], out: Path, *level: str) -> list[str]:
    corpus, qa = small
    return ["evaluate", "--corpus", str(corpus), "--qa", str(qa), *level, "--retriever", "bm25", "--unit", "chunk",
            "--no-chunking", "--pool-size", "20", "--trials", "5", "--seed", "3", "--out", str(out)]  # fmt: skip


def _without_timings(report: dict) -> dict:
    return {k: v for k, v in report.items() if not k.startswith("seconds")}


def test_both_spellings_give_the_same_report(small, bm25_fanout, tmp_path, capsys) -> None:
    by_alpha, by_level = tmp_path / "alpha.json", tmp_path / "level.json"
    assert main(_evaluate(small, by_alpha, "--alpha", "0.1", "--alpha", "0.2")) == 0, capsys.readouterr().err
    assert main(_evaluate(small, by_level, "--confidence-level", "0.9", "--confidence-level", "0.8")) == 0
    assert bm25_fanout == ["bm25", "bm25"]  # the fake ran, not the real stack
    a, b = json.loads(by_alpha.read_text()), json.loads(by_level.read_text())
    assert _without_timings(a) == _without_timings(b)
    rows = [r for r in a["results"] if "alpha" in r]
    assert rows and {r["alpha"] for r in rows} == {0.1, 0.2}  # exactly, not 0.09999999999999998
    assert all(r["confidence_level"] == {0.1: 0.9, 0.2: 0.8}[r["alpha"]] for r in rows)
    assert list(rows[0])[list(rows[0]).index("alpha") + 1] == "confidence_level"


def test_a_different_level_gives_a_different_report(small, bm25_fanout, tmp_path, capsys) -> None:
    """A negative control: the comparison above can fail."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(_evaluate(small, a, "--alpha", "0.1")) == 0, capsys.readouterr().err
    assert main(_evaluate(small, b, "--confidence-level", "0.8")) == 0
    assert _without_timings(json.loads(a.read_text())) != _without_timings(json.loads(b.read_text()))


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("evaluate", ["--corpus", "c.jsonl", "--qa", "q.jsonl"]),
        ("calibrate", ["--corpus", "c.jsonl", "--questions", "q.jsonl", "--out", "cal.json"]),
        ("monitor", ["--corpus", "c.jsonl", "--qa", "q.jsonl", "--stream", "s.jsonl", "--out", "m.json"]),
        ("demo", []),
    ],
)
def test_giving_both_is_a_one_line_error(command, argv, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is read or written: the error comes first
    # --alpha 0.1 is calibrate's and demo's default, given explicitly: still both spellings
    code = main([command, *argv, "--alpha", "0.1", "--confidence-level", "0.9"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("conformal-rag: error: --alpha and --confidence-level"), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--confidence-level", "1.5"], "--confidence-level must be strictly between 0 and 1, got 1.5."),
    ([], "give the level as --alpha (target miscoverage) or --confidence-level (1 - alpha)."),
])  # fmt: skip
def test_a_bad_or_missing_level_is_a_one_line_error(argv, message, tmp_path, capsys) -> None:
    code = main(["evaluate", "--corpus", str(tmp_path / "c.jsonl"), "--qa", str(tmp_path / "q.jsonl"), *argv])
    assert code == 2
    assert capsys.readouterr().err == f"conformal-rag: error: {message}\n"
