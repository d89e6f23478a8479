"""``conformal-rag evaluate --control recall`` as a user runs it (issue 11 part 3), on a small long-document run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main

N_DOCUMENTS = 45
N_QUESTIONS = 240


def _small_long_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """The first ``N_DOCUMENTS`` long documents (all 31 answering ones among them) and ``N_QUESTIONS`` questions.

    Chunking all 199 documents and querying 705 questions would take about 15 s per run.
    """
    from conformal_rag_plugins.local.long_documents import write_long_documents

    corpus, qa = write_long_documents(tmp_path / "long")
    docs = corpus.read_text(encoding="utf-8").splitlines()[:N_DOCUMENTS]
    keep = {json.loads(line)["id"] for line in docs}
    lines = qa.read_text(encoding="utf-8").splitlines()
    questions = [line for line in lines if json.loads(line)["context_id"] in keep][:N_QUESTIONS]
    (tmp_path / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text("\n".join(questions) + "\n", encoding="utf-8")
    return tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"


def _evaluate(tmp_path: Path, name: str, *extra: str) -> list[str]:
    return [
        "evaluate",
        "--corpus",
        str(tmp_path / "corpus.jsonl"),
        "--qa",
        str(tmp_path / "qa.jsonl"),
        "--alpha",
        "0.1",
        "--alpha",
        "0.2",
        "--trials",
        "40",
        "--seed",
        "4",
        "--retriever",
        "dense",
        "--json",
        str(tmp_path / name),
        *extra,
    ]


@pytest.mark.integration
def test_evaluate_control_recall_adds_recall_rows_and_keeps_the_rest(tmp_path, capsys) -> None:
    _small_long_corpus(tmp_path)
    assert main(_evaluate(tmp_path, "coverage.json", "--pac-delta", "0.1")) == 0
    coverage_out = capsys.readouterr().out
    assert main(_evaluate(tmp_path, "recall.json", "--control", "recall", "--pac-delta", "0.1")) == 0
    recall_out = capsys.readouterr().out
    before = json.loads((tmp_path / "coverage.json").read_text())
    after = json.loads((tmp_path / "recall.json").read_text())
    assert "control" not in before and "recall" not in before  # the default report is today's
    assert not any("mean_recall" in r for r in before["results"])
    assert after["control"] == "recall" and after["recall"]["n_multi_gold"] >= 10
    timing = ("seconds_index", "seconds_queries")
    assert {k: v for k, v in after.items() if k not in (*timing, "results", "control", "recall")} == {
        k: v for k, v in before.items() if k not in (*timing, "results")
    }
    old_rows = [r for r in after["results"] if "mean_recall" not in r]
    assert old_rows == before["results"]  # existing rows unchanged (same seed, same pools)
    recall_rows = {(r["alpha"], r["method"]): r for r in after["results"] if "mean_recall" in r}
    assert set(recall_rows) == {(a, m) for a in (0.1, 0.2) for m in ("crc", "ltt", "single-gold")}
    for alpha in (0.1, 0.2):
        crc, single = recall_rows[(alpha, "crc")], recall_rows[(alpha, "single-gold")]
        assert crc["target_recall"] == pytest.approx(1 - alpha) and crc["trials"] == 40
        # 120 calibration and 120 test questions, 40 trials: 3 SE of the mean recall is about 0.02
        assert crc["mean_recall"] >= 1 - alpha - 0.03, crc
        assert crc["mean_recall"] >= single["mean_recall"] and crc["mean_set_size"] >= single["mean_set_size"]
    assert coverage_out in recall_out or coverage_out.split("chunking:")[0] in recall_out
    assert "| alpha | method | target_recall | mean_recall |" in recall_out


def test_evaluate_refuses_an_unknown_control(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--corpus", "c", "--qa", "q", "--alpha", "0.1", "--json", "o", "--control", "bogus"])
    assert "invalid choice" in capsys.readouterr().err
