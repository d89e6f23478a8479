"""``ConformalRetriever.evaluate`` gives ``conformal-rag report``'s verdict on the same data (issue 34).

A seeded slice of the bundled long documents (50 documents, questions labelled with the *document*
ids, 60% calibration / 40% held out: ``benchmarks/tuned_one_call.py``'s slice) is calibrated with
``conformal-rag calibrate`` (in-process; Chroma + MiniLM, tuned hybrid). Then, on ALL the questions
(the calibration ones must be left out by both):

* ``conformal-rag report`` (in-process) writes its verdict into ``report.json``;
* ``ConformalRetriever.from_documents(docs, calibration=...)`` rebuilds the host in Python and
  ``.evaluate(questions)`` asks the held-out questions as an app does.

Status, coverage, band, text and counts must be equal. Negative controls: the same host served with
a deliberately lowered threshold returns smaller sets and lower coverage, down to status ``below``.
About 30 s per framework.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tuned_one_call.py"


def _bench():
    spec = importlib.util.spec_from_file_location("benchmark_tuned_one_call_verdict", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_evaluate_gives_the_reports_verdict(framework: str, tmp_path: Path) -> None:
    from conformal_rag_plugins.cli import main
    from conformal_rag_plugins.datasets.examples import save_examples
    from conformal_rag_plugins.report.data import calibrated_verdict
    from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

    bench = _bench()
    entries, cal_q, held = bench.slice_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bench.run_cli(framework, entries, cal_q, tmp_path / "cli")
    questions = [*cal_q, *held]
    save_examples(questions, tmp_path / "all.jsonl")
    argv = ["report", "--calibration", str(tmp_path / "cli" / "calibration.json"),
            "--corpus", str(tmp_path / "cli" / "slice.jsonl"), "--qa", str(tmp_path / "all.jsonl"),
            "--out", str(tmp_path / "report"), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    cli = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))

    retriever_class = importlib.import_module(f"conformal_rag_plugins.{framework}").ConformalRetriever
    docs = bench.framework_documents(framework, entries)
    cal = RetrievalCalibration.load(tmp_path / "cli" / "calibration.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retriever = retriever_class.from_documents(docs, calibration=cal, persist_dir=tmp_path / "python-chroma")
    report = retriever.evaluate(questions)

    v, expected = report.verdict.to_dict(), cli["verdict"]
    assert report.n_questions == cli["n_heldout"] == len(held) and report.n_excluded == len(cal_q)
    for key in ("status", "consistent", "target", "n_test", "n_calibration", "text"):
        assert v[key] == expected[key], (key, v, expected)
    for key in ("coverage", "band_low", "band_high"):
        assert v[key] == pytest.approx(expected[key], abs=1e-12), (key, v, expected)
    assert report.coverage == v["coverage"] and report.summary().startswith(expected["text"])
    assert report.mean_set_size > 0 and report.mean_context_tokens > 0 and report.share_guaranteed == 1.0

    # negative controls: a threshold lowered to the calibration scores' median serves smaller sets and covers less;
    # one below every score serves nothing, and the verdict says the coverage is below its band
    median = sorted(cal.scores_)[len(cal.scores_) // 2]
    weak = [_evaluate(retriever_class, docs, replace(cal, threshold_=t), questions, tmp_path) for t in (median, -1.0)]
    assert weak[0].coverage < report.coverage and weak[0].mean_set_size < report.mean_set_size
    assert weak[1].coverage < weak[0].coverage and weak[1].mean_set_size < weak[0].mean_set_size
    assert weak[1].verdict.status == "below" and weak[1].verdict.consistent is False
    for w in weak:
        assert w.verdict == calibrated_verdict(cal, w.coverage, len(held))


def _evaluate(retriever_class, docs, calibration, questions, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retriever = retriever_class.from_documents(
            docs, calibration=calibration, persist_dir=tmp_path / "python-chroma"
        )
        return retriever.evaluate(questions)
