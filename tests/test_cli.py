"""The ``conformal-rag`` command as a user runs it."""

from __future__ import annotations

import json

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.local.data import bundled_corpus_paths, bundled_qa_path


def _args(tmp_path, *extra: str) -> list[str]:
    corpus, distractors = bundled_corpus_paths()
    return [
        "evaluate",
        "--corpus",
        str(corpus),
        "--corpus",
        str(distractors),
        "--qa",
        str(bundled_qa_path()),
        "--json",
        str(tmp_path / "out.json"),
        *extra,
    ]


@pytest.mark.integration
def test_evaluate_writes_the_documented_json(tmp_path, capsys) -> None:
    code = main(
        _args(tmp_path, "--alpha", "0.1", "--alpha", "0.05", "--trials", "20", "--seed", "3", "--pac-delta", "0.1")
    )
    assert code == 0
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["n_questions"] == 705
    methods = {r["method"] for r in report["results"]}
    assert {"split", "pac", "conflare", "topk@1", "topk@5", "topk@10"} <= methods
    for row in report["results"]:
        assert set(row) >= {
            "alpha",
            "method",
            "mean_coverage",
            "std_coverage",
            "mean_set_size",
            "median_set_size",
            "trials",
        }
        assert row["trials"] == 20
    split = {r["alpha"]: r for r in report["results"] if r["method"] == "split"}
    assert split[0.1]["mean_coverage"] >= 0.9 - 0.02 and split[0.1]["mean_set_size"] <= 2.5
    assert split[0.05]["mean_coverage"] >= 0.95 - 0.02
    assert "| alpha | method |" in capsys.readouterr().out


def test_bad_alpha_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(_args(tmp_path, "--alpha", "1.5")) == 2
    assert "strictly between 0 and 1" in capsys.readouterr().err


@pytest.mark.integration
def test_evaluate_on_long_documents_chunks_and_covers(tmp_path, capsys) -> None:
    """Issue 5's done criterion as a user runs it: long documents through ``conformal-rag evaluate``."""
    from conformal_rag_plugins.local.long_documents import write_long_documents

    corpus, qa = write_long_documents(tmp_path / "long")
    code = main(
        [
            "evaluate",
            "--corpus",
            str(corpus),
            "--qa",
            str(qa),
            "--alpha",
            "0.1",
            "--trials",
            "30",
            "--seed",
            "5",
            "--json",
            str(tmp_path / "long.json"),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "long.json").read_text())
    chunking = report["chunking"]
    assert chunking["n_entries"] == 199 and chunking["max_chunk_tokens"] <= 254
    tuned = next(r for r in report["results"] if r["method"] == "tuned")
    # 30 trials of ~247 calibration and 353 test questions: 3 SE of the mean coverage is about 0.01
    assert tuned["mean_coverage"] >= 0.9 - 0.02, tuned
    assert tuned["mean_set_size"] <= 2.5, tuned  # the short passages need about 1.3 at this alpha
    assert "tuned" in capsys.readouterr().out


@pytest.mark.integration
def test_evaluate_answers_samples_the_whole_answer_pool_and_reports_the_guarantee(tmp_path) -> None:
    """``evaluate --answers`` with the local Gemma: every pool chunk sampled, guarantee flags per method.

    Claims: the command samples the live model for the whole ``--answer-pool`` of each question, reports every
    combination method on the answerable subset, and each row's ``frac_trials_guaranteed`` is a share that
    the old ``finite_thresholds`` field repeats. It fails when the command errors, drops a method, reports
    another pool or question count, or the two guarantee fields disagree. Six questions (and one unanswerable)
    are enough for that; the validity of the methods is tested on the recorded samples
    (``tests/evaluation/test_answer_set_trials.py``), so no more live draws are needed here.
    """
    args = _args(tmp_path, "--answers", "--alpha", "0.7", "--trials", "3", "--samples", "2", "--no-pilot")
    code = main([*args, "--max-questions", "6", "--answer-pool", "3"])
    assert code == 0
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["answer_pool"] == 3 and report["n_questions"] == 6
    answerable = [r for r in report["results"] if r["subset"] == "answerable"]
    assert {r["method"] for r in answerable} >= {"bonferroni", "hmp", "bonferroni-bo", "hmp-bo"}
    for row in answerable:
        assert 0.0 <= row["frac_trials_guaranteed"] <= 1.0
        assert row["finite_thresholds"] == row["frac_trials_guaranteed"]  # old field kept, now honest for HMP


@pytest.mark.integration
def test_evaluate_answers_with_the_likelihood_score(tmp_path) -> None:
    """``--generator-score likelihood`` samples Gemma with logprobs and reports the score it used."""
    args = _args(tmp_path, "--answers", "--alpha", "0.7", "--trials", "2", "--samples", "2", "--no-pilot")
    code = main([*args, "--max-questions", "6", "--answer-pool", "2", "--generator-score", "likelihood"])
    assert code == 0
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["generator_score"] == "likelihood" and report["n_questions"] == 6
    answerable = [r for r in report["results"] if r["subset"] == "answerable"]
    assert answerable and all(0.0 <= r["mean_coverage"] <= 1.0 for r in answerable)
