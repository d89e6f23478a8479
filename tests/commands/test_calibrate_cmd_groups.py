"""``conformal-rag calibrate --group-by FIELD``: the saved calibration carries per-group thresholds."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.datasets.examples import save_examples
from conformal_rag_plugins.local.corpus import bundled_questions
from conformal_rag_plugins.local.data import bundled_corpus_paths
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration


def _labelled(tmp_path, n: int, *, drop: int | None = None) -> str:
    examples = []
    for i, ex in enumerate(bundled_questions(True)[:n]):
        meta = {} if i == drop else {"collection": "even" if i % 2 == 0 else "odd"}
        examples.append(replace(ex, metadata=ex.metadata | meta))
    path = tmp_path / "labelled.jsonl"
    save_examples(examples, path)
    return str(path)


def _argv(tmp_path, questions: str) -> list[str]:
    return ["calibrate", "--corpus", str(bundled_corpus_paths()[0]), "--questions", questions, "--retriever",
            "dense", "--alpha", "0.2", "--persist-dir", str(tmp_path / "chroma"), "--out",
            str(tmp_path / "cal.json"), "--group-by", "collection", "--quiet"]  # fmt: skip


@pytest.mark.integration
def test_calibrate_group_by_saves_group_thresholds(tmp_path, capsys) -> None:
    assert main(_argv(tmp_path, _labelled(tmp_path, 40))) == 0, capsys.readouterr().err
    assert "group even: n=20" in capsys.readouterr().out
    data = json.loads((tmp_path / "cal.json").read_text())
    assert data["group_by"] == "collection" and sorted(data["groups"]) == ["even", "odd"]
    cal = RetrievalCalibration.load(tmp_path / "cal.json")  # every group threshold recomputed on load
    assert cal.threshold_for("odd")[1] == "group" and cal.threshold_for("other")[1] == "keep-all-unknown-group"


def test_calibrate_group_by_a_missing_field_is_exit_2(tmp_path, capsys) -> None:
    assert main(_argv(tmp_path, _labelled(tmp_path, 10, drop=3))) == 2
    assert "has no metadata key 'collection'" in capsys.readouterr().err


def _chunk_argv(tmp_path, questions: str, key: str = "title") -> list[str]:
    argv = _argv(tmp_path, questions)
    i = argv.index("--group-by")
    return [*argv[:i], "--chunk-group-key", key, *argv[i + 2 :]]


@pytest.mark.integration
def test_calibrate_chunk_group_key_saves_label_conditional_thresholds(tmp_path, capsys) -> None:
    """--chunk-group-key title: each question counts in its gold chunk's article (the corpus title)."""
    questions = tmp_path / "plain.jsonl"
    save_examples(bundled_questions(True)[:60], questions)
    assert main(_chunk_argv(tmp_path, str(questions))) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "chunk group title=Normans: n=" in out
    data = json.loads((tmp_path / "cal.json").read_text())
    assert data["chunk_group_key"] == "title" and data["group_by"] == "title"
    cal = RetrievalCalibration.load(tmp_path / "cal.json")
    articles = {ex.gold_ids[0].split("#")[0] for ex in bundled_questions(True)[:60]}
    assert cal.chunk_group_key_ == "title" and set(cal.groups_) == articles


def test_calibrate_chunk_group_key_unknown_for_a_question_is_exit_2(tmp_path, capsys) -> None:
    """A key neither the qa line nor the chunk carries: one line on stderr, exit 2, before any indexing."""
    assert main(_chunk_argv(tmp_path, _labelled(tmp_path, 10, drop=3), key="collection")) == 2
    err = capsys.readouterr().err
    assert "Cannot tell the 'collection' of the gold chunk" in err and len(err.strip().splitlines()) == 1


def test_calibrate_chunk_group_key_with_group_by_is_exit_2(tmp_path, capsys) -> None:
    argv = [*_argv(tmp_path, _labelled(tmp_path, 10)), "--chunk-group-key", "title"]
    assert main(argv) == 2
    assert "exclude each other" in capsys.readouterr().err
