"""What ``conformal-rag evaluate`` prints and warns, as a user runs it.

* ``--out F`` / ``--json F``: the report goes to F and stdout gets the table and a one-line
  summary, not the whole JSON; without a file the report JSON is stdout's last line.
* Default chunking: no "split them first" window warning, although the ``document`` unit
  indexes whole documents on purpose; the warning still fires for long texts embedded unsplit.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.local.data import bundled_corpus_paths, bundled_qa_path

WINDOW_WARNING = "token window"


def _json_lines(stdout: str) -> list[dict]:
    found = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def _bundled_plus_one(tmp_path: Path) -> list[str]:
    """The bundled corpus files and one short entry of this test's own, so its Chroma collections are new.

    Collections are named by a digest of the entries and reused when filled; a collection some
    earlier test of the session filled would embed nothing here, and no warning could fire.
    """
    corpus, distractors = bundled_corpus_paths()
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "cli-help-extra", "text": "A short note on help texts."}) + "\n")
    return ["--corpus", str(corpus), "--corpus", str(distractors), "--corpus", str(extra)]


@pytest.mark.integration
def test_default_evaluate_of_the_bundled_corpus_warns_nothing_and_prints_a_summary(tmp_path, capsys) -> None:
    out = tmp_path / "report.json"
    argv = ["evaluate", *_bundled_plus_one(tmp_path), "--qa", str(bundled_qa_path()), "--alpha", "0.1"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main([*argv, "--trials", "2", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    report = json.loads(out.read_text())
    # the run indexed whole documents (the document unit) beside the chunks: the case that warned before
    assert "document" in report["units"] and report["chunking"]["n_split_entries"] > 0
    window = [str(w.message) for w in caught if WINDOW_WARNING in str(w.message)]
    assert not window, window
    assert WINDOW_WARNING not in printed.err
    # --json F: the table and a summary on stdout, the JSON in F only
    assert "| alpha | method |" in printed.out
    assert not _json_lines(printed.out), "the report JSON was printed to stdout although it went to a file"
    summary = printed.out.strip().splitlines()[-1]
    assert summary.startswith(f"wrote {out}: {len(report['results'])} result rows over {report['n_questions']}")


def _small_corpus(tmp_path: Path, n_documents: int = 12) -> tuple[Path, Path]:
    corpus, _ = bundled_corpus_paths()
    docs = corpus.read_text(encoding="utf-8").splitlines()[:n_documents]
    keep = {json.loads(line)["id"] for line in docs}
    qa = [
        line
        for line in bundled_qa_path().read_text(encoding="utf-8").splitlines()
        if json.loads(line)["context_id"] in keep
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text("\n".join(qa) + "\n", encoding="utf-8")
    return tmp_path / "corpus.jsonl", tmp_path / "qa.jsonl"


@pytest.mark.integration
def test_evaluate_without_an_output_file_prints_the_report_json_and_with_out_writes_the_same(tmp_path, capsys) -> None:
    corpus, qa = _small_corpus(tmp_path)
    argv = ["evaluate", "--corpus", str(corpus), "--qa", str(qa), "--alpha", "0.2", "--trials", "3"]
    argv += ["--retriever", "dense", "--unit", "chunk"]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    (printed,) = _json_lines(stdout)
    assert stdout.strip().splitlines()[-1].startswith("{")  # a pipeline reads the last line
    assert main([*argv, "--out", str(tmp_path / "out.json")]) == 0
    assert not _json_lines(capsys.readouterr().out)
    written = json.loads((tmp_path / "out.json").read_text())
    assert printed["results"] == written["results"]
    assert printed["n_questions"] == written["n_questions"] > 0


@pytest.mark.integration
@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_window_warning_fires_for_long_texts_embedded_unsplit_and_not_for_the_document_unit(framework) -> None:
    """Negative control: the warning is silenced only where whole documents are indexed on purpose."""
    from conformal_rag_plugins.commands.hosts import build_fanout
    from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig

    long_text = " ".join(f"Sentence {i} about the Normans and their conquest of England." for i in range(60))
    entries = [CorpusEntry(f"{framework}-long", long_text), CorpusEntry(f"{framework}-short", "Rollo led the Norse.")]

    def window_warnings(**kw) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            build_fanout(
                framework, "dense", kw.pop("entries"), grid=[FusionConfig("zscore", 0.5)], pool_sizes=[2], **kw
            )
        return [str(w.message) for w in caught if WINDOW_WARNING in str(w.message)]

    fired = window_warnings(entries=entries)
    assert len(fired) == 1 and fired[0].startswith("1 of 2 texts exceed the 254-token window"), fired
    # a different collection (ids differ), so the texts are embedded again, this time on purpose
    renamed = [CorpusEntry(e.id + "-doc", e.text) for e in entries]
    assert window_warnings(entries=renamed, whole_documents=True) == []
