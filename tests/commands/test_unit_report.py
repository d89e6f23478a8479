"""``conformal-rag evaluate`` choosing what the LLM reads: unit, fusion point and pool, by context tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main

N_DOCUMENTS = 60


def _small_long_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """The first long documents (6 SQuAD paragraphs each) and their questions, as a user's files."""
    from conformal_rag_plugins.local.long_documents import write_long_documents

    corpus, qa = write_long_documents(tmp_path / "long")
    docs = corpus.read_text(encoding="utf-8").splitlines()[:N_DOCUMENTS]
    keep = {json.loads(line)["id"] for line in docs}
    questions = [line for line in qa.read_text(encoding="utf-8").splitlines() if json.loads(line)["context_id"] in keep]
    (tmp_path / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text("\n".join(questions) + "\n", encoding="utf-8")
    return tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"


def _evaluate(tmp_path: Path, name: str, *extra: str) -> list[str]:
    corpus, qa = tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"
    return ["evaluate", "--corpus", str(corpus), "--qa", str(qa), "--json", str(tmp_path / name), *extra]


@pytest.mark.integration
def test_default_evaluate_chooses_unit_fusion_and_pool_by_context_tokens(tmp_path, capsys) -> None:
    _small_long_corpus(tmp_path)
    argv = _evaluate(tmp_path, "out.json", "--alpha", "0.1", "--trials", "60", "--seed", "2", "--chunk-size", "80")
    assert main(argv) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["units"] == ["chunk", "parent:max", "document"]
    # larger pools are retrieved only when some trial's base pool misses more than alpha/2
    assert report["pool_sizes"] in ([50], [50, 100, 200]) and report["larger_pools"]
    assert report["objective"] == "tokens"
    for row in report["results"]:  # every row reports what the LLM reads
        assert isinstance(row["mean_context_tokens"], float) and row["mean_context_tokens"] > 0, row
    rows = {r["method"]: r for r in report["results"]}
    tuned, best = rows["tuned"], report["best_fixed"]["0.1"]
    choice = report["tuning"]["0.1"]
    assert choice["unit"] in report["units"] and choice["pool_size"] in report["pool_sizes"]
    assert choice["family"] in ("similarity", "rank", "relative")
    settings = report["candidates"]["0.1"]
    assert {k.split("/")[0] for k in settings if "/" in k} == {"parent:max", "document"}
    assert len(settings) == 3 * 6 * len(report["pool_sizes"]) * 3  # units x fusion points x pools x families
    # ~215 questions: each trial tests ~107; the mean over 60 random splits of this fixed set is >= 0.9 in
    # expectation (exchangeable splits), with a Monte Carlo error below 0.005.
    assert tuned["mean_coverage"] >= 0.9 - 0.015, tuned
    # what the tuned default reads: close to the best fixed setting in hindsight, far below the whole pool
    assert tuned["mean_context_tokens"] <= 1.5 * best["mean_context_tokens"], (tuned, best)
    whole_pool = rows["topk@10"]["mean_context_tokens"] * 5  # 50 chunks of ~63 tokens
    assert tuned["mean_context_tokens"] < whole_pool / 10
    assert "mean_context_tokens" in out and "best fixed setting in hindsight" in out


@pytest.mark.integration
def test_evaluate_at_parent_level_returns_parents_and_warns_about_a_small_pool(tmp_path, capsys) -> None:
    _small_long_corpus(tmp_path)
    argv = _evaluate(
        tmp_path,
        "parents.json",
        "--alpha",
        "0.1",
        "--trials",
        "20",
        "--chunk-size",
        "80",
        "--retriever",
        "dense",
        "--unit",
        "parent:max",
        "--pool-size",
        "2",
        "--pool-sizes",
        "2,40",
    )
    assert main(argv) == 0
    captured = capsys.readouterr()
    report = json.loads((tmp_path / "parents.json").read_text())
    assert report["units"] == ["parent:max"] and report["base_setting"] == "parent:max/dense"
    split = next(r for r in report["results"] if r["method"] == "split")
    # a returned unit is a whole document (~720 MiniLM tokens), not a chunk
    assert split["mean_context_tokens"] / split["mean_set_size"] > 500
    assert report["mean_unit_tokens"]["parent:max"] > 500
    # two chunks rarely hold the gold document's chunk: the miss share is far above alpha/2
    assert report["n_pool_misses"] > 0.05 * report["n_questions"]
    (note,) = report["warnings"]
    assert "pool of 2" in note and "pool of 40 misses" in note
    assert "warning:" in captured.err
    misses = report["pool_misses"]["parent:max/dense"]
    assert misses["40"] < misses["2"]


def test_bad_pool_sizes_are_a_clear_error(tmp_path, capsys) -> None:
    argv = ["evaluate", "--corpus", "c", "--qa", "q", "--alpha", "0.1", "--json", str(tmp_path / "o.json")]
    assert main([*argv, "--pool-sizes", "50,lots"]) == 2
    assert "--pool-sizes takes comma-separated whole numbers" in capsys.readouterr().err
    assert main([*argv, "--pool-sizes", "50,0"]) == 2
    assert "pool size" in capsys.readouterr().err
