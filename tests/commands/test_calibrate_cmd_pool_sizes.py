"""``conformal-rag calibrate --pool-sizes``: the tuned hybrid chooses a larger pool when the base pool misses."""

from __future__ import annotations

import json

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.datasets.examples import save_examples
from conformal_rag_plugins.local.corpus import bundled_questions
from conformal_rag_plugins.local.data import bundled_corpus_paths


@pytest.mark.integration
def test_a_small_pool_is_replaced_by_a_larger_one(tmp_path, capsys) -> None:
    questions = tmp_path / "labelled.jsonl"
    save_examples(list(bundled_questions(True))[:200], questions)
    corpus = [arg for path in bundled_corpus_paths() for arg in ("--corpus", str(path))]
    out = tmp_path / "calibration.json"
    argv = ["calibrate", *corpus, "--questions", str(questions), "--persist-dir", str(tmp_path / "chroma"),
            "--out", str(out), "--pool-size", "2", "--pool-sizes", "4,8", "--quiet"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    sel = data["selection"]
    assert sel["pool_sizes"] == [2, 4, 8] and sel["pool_size"] in (4, 8) and data["pool_size"] == sel["pool_size"]
    assert f"top_k={sel['pool_size']}," in data["fingerprint"]["retriever"]
    assert f"tuned: pool {sel['pool_size']} of [2, 4, 8], by tokens" in printed


@pytest.mark.parametrize("bad", ["4,x", ",", "4,0"])
def test_bad_pool_sizes_exit_2(tmp_path, capsys, bad) -> None:
    questions = tmp_path / "q.jsonl"
    save_examples(list(bundled_questions(True))[:5], questions)
    argv = ["calibrate", "--corpus", str(bundled_corpus_paths()[0]), "--questions", str(questions),
            "--pool-sizes", bad, "--out", str(tmp_path / "c.json")]  # fmt: skip
    assert main(argv) == 2
    assert "pool" in capsys.readouterr().err
