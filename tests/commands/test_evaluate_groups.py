"""``conformal-rag evaluate --group-by FIELD`` as a user runs it: the ``groups`` block, and a clear error."""

from __future__ import annotations

import json

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.local.data import bundled_corpus_paths, bundled_qa_path

PER_ARTICLE = 30


def _qa_with_article(tmp_path, *, drop_field_on: int | None = None) -> str:
    """The first answerable questions of three articles, each line carrying an ``article`` field."""
    kept, counts = [], {}
    for line in bundled_qa_path().read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        article = row["context_id"].split("#")[0]
        if row["is_impossible"] or article == "Sky_(United_Kingdom)" or article == "Victoria_(Australia)":
            continue
        if counts.get(article, 0) < PER_ARTICLE:
            counts[article] = counts.get(article, 0) + 1
            kept.append(row | {"article": article})
    if drop_field_on is not None:
        del kept[drop_field_on]["article"]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    return str(path)


def _args(tmp_path, qa: str) -> list[str]:
    corpus, _ = bundled_corpus_paths()
    return [
        "evaluate",
        "--corpus",
        str(corpus),
        "--qa",
        qa,
        "--alpha",
        "0.2",
        "--trials",
        "30",
        "--retriever",
        "dense",
        "--no-chunking",
        "--json",
        str(tmp_path / "out.json"),
        "--group-by",
        "article",
    ]


@pytest.mark.integration
def test_evaluate_group_by_writes_the_groups_block(tmp_path, capsys) -> None:
    assert main(_args(tmp_path, _qa_with_article(tmp_path))) == 0
    report = json.loads((tmp_path / "out.json").read_text())
    assert {r["method"] for r in report["results"]} >= {"split", "conflare"}  # the existing rows are unchanged
    block = report["groups"]
    assert block["field"] == "article" and block["trials"] == 30 and block["score_family"] == "relative"
    per = block["by_alpha"]["0.2"]["groups"]
    assert set(per) == {"Normans", "Computational_complexity_theory", "Southern_California"}
    for entry in per.values():
        assert entry["n"] == PER_ARTICLE
        for rule in ("pooled", "per_group"):
            assert 0.0 <= entry[rule]["mean_coverage"] <= 1.0 and entry[rule]["mean_set_size"] >= 0.0
    worst = block["by_alpha"]["0.2"]["worst_group_coverage"]
    assert worst["pooled"] == min(e["pooled"]["mean_coverage"] for e in per.values())
    assert "worst group coverage" in capsys.readouterr().out


def test_evaluate_group_by_a_missing_field_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(_args(tmp_path, _qa_with_article(tmp_path, drop_field_on=4))) == 2
    err = capsys.readouterr().err
    assert "no field 'article' to group by" in err and "qa.jsonl" in err
