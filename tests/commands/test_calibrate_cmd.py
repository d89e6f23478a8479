"""``conformal-rag calibrate`` on the real stack, then the saved calibration used from Python."""

from __future__ import annotations

import json

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.core.errors import FingerprintMismatchError
from conformal_rag_plugins.datasets.examples import save_examples
from conformal_rag_plugins.local.corpus import bundled_questions
from conformal_rag_plugins.local.data import bundled_corpus_paths
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

pytestmark = pytest.mark.integration


def test_calibrate_tunes_a_hybrid_and_the_json_rebuilds_it(tmp_path, capsys) -> None:
    from conformal_rag_plugins.commands.calibration_inputs import load_chunks
    from conformal_rag_plugins.commands.hosts import corpus_key
    from conformal_rag_plugins.llamaindex import ConformalRetriever
    from conformal_rag_plugins.llamaindex.hybrid_tuning import hybrid_from_calibration
    from conformal_rag_plugins.local.chroma import chroma_client
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index, build_hybrid_retriever

    questions = tmp_path / "labelled.jsonl"
    save_examples(list(bundled_questions(True))[:300], questions)
    corpus = [arg for path in bundled_corpus_paths() for arg in ("--corpus", str(path))]
    persist, out = tmp_path / "chroma", tmp_path / "calibration.json"
    argv = ["calibrate", *corpus, "--questions", str(questions), "--alpha", "0.1", "--persist-dir", str(persist),
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "tuned: fusion " in printed and f"wrote {out}" in printed
    data = json.loads(out.read_text())
    assert data["selection"]["rule"] == "tuned-hybrid" and data["n"] == 210  # 30% of 300 tuned, 70% calibrate
    assert data["labels"]["gold_rule"]["unsplit"] + data["labels"]["gold_rule"].get("answer-in-chunk", 0) == 300

    cal = RetrievalCalibration.load(out)
    chunks = load_chunks("llamaindex", [str(p) for p in bundled_corpus_paths()], None)
    index, nodes = build_chroma_index(
        chunks, client=chroma_client(persist), collection_name=f"crp-llamaindex-{corpus_key(chunks)}"
    )
    retriever = ConformalRetriever(retriever=hybrid_from_calibration(index, nodes, cal), calibration=cal)
    got = retriever.retrieve("What is the name of the region the Normans gave their name to?")
    assert 1 <= len(got) <= 50 and got[0].node.metadata["conformal_alpha"] == pytest.approx(0.1)
    other = "relative_score" if cal.selection_["fusion_method"] == "zscore" else "dist_based_score"
    with pytest.raises(FingerprintMismatchError, match="retriever"):
        ConformalRetriever(retriever=build_hybrid_retriever(index, nodes, mode=other), calibration=cal)


def test_calibrate_bad_alpha_is_exit_2(tmp_path, capsys) -> None:
    questions = tmp_path / "q.jsonl"
    save_examples(list(bundled_questions(True))[:5], questions)
    argv = ["calibrate", "--corpus", str(bundled_corpus_paths()[0]), "--questions", str(questions),
            "--alpha", "0", "--out", str(tmp_path / "c.json")]  # fmt: skip
    assert main(argv) == 2
    assert "strictly between 0 and 1" in capsys.readouterr().err
