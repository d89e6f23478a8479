"""``conformal-rag report`` on the real stack: files, JSON, the page in headless Chromium, bad inputs."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.calibration import Fingerprint, RetrievalCalibration, save_examples
from conformal_rag_plugins.calibration.answer_sets import AnswerSetCalibration
from conformal_rag_plugins.cli import main
from conformal_rag_plugins.local.corpus import bundled_questions
from conformal_rag_plugins.local.data import bundled_corpus_paths

CORPUS = [arg for path in bundled_corpus_paths() for arg in ("--corpus", str(path))]
QA = str(Path(bundled_corpus_paths()[0]).with_name("qa.jsonl"))
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]  # fmt: skip


def _report(calibration: Path, out: Path, *extra: str) -> list[str]:
    return ["report", "--calibration", str(calibration), *CORPUS, "--qa", QA, "--out", str(out), "--quiet", *extra]


@pytest.fixture(scope="module")
def dense_calibration(tmp_path_factory) -> Path:
    """``conformal-rag calibrate`` of a dense host on 150 seeded random questions (the rest are held out)."""
    tmp = tmp_path_factory.mktemp("report")
    questions = list(bundled_questions(True))
    picked = np.random.default_rng(0).choice(len(questions), 150, replace=False)
    save_examples([questions[i] for i in sorted(picked)], tmp / "labelled.jsonl")
    out = tmp / "calibration.json"
    argv = ["calibrate", *CORPUS, "--questions", str(tmp / "labelled.jsonl"), "--retriever", "dense", "--alpha", "0.1",
            "--persist-dir", str(tmp / "chroma"), "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    return out


def _check_in_chromium(page_path: Path, n_figures: int) -> None:
    """Open the page offline in headless Chromium; every ``<img>`` must have loaded."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if chromium is None or sync_playwright is None:
        if os.environ.get("CONFORMAL_RAG_REQUIRE_BROWSER"):
            pytest.fail("CONFORMAL_RAG_REQUIRE_BROWSER is set but chromium or playwright is missing")
        pytest.skip("chromium (apt) or playwright (pip) is missing: run .ci/ensure_chromium.sh")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.route("http*://**", lambda route: route.abort())  # the page must need no network
            page.goto(page_path.resolve().as_uri())
            page.wait_for_load_state("load")
            images = page.eval_on_selector_all(
                "img", "els => els.map(e => ({ok: e.complete, w: e.naturalWidth, h: e.naturalHeight}))"
            )
        finally:
            browser.close()
    assert len(images) == n_figures
    assert all(img["ok"] and img["w"] > 0 and img["h"] > 0 for img in images), images


@pytest.mark.integration
def test_report_writes_figures_html_and_json_that_chromium_loads(dense_calibration, tmp_path, capsys) -> None:
    out = tmp_path / "report"
    assert main(_report(dense_calibration, out)) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "held-out coverage" in printed and "wrote 3 figures" in printed
    data = json.loads((out / "report.json").read_text())
    names = ["coverage.png", "set_sizes.png", "scores.png"]
    assert data["figures"] == names and all((out / n).read_bytes().startswith(b"\x89PNG") for n in names)
    assert data["host"] == {"framework": "llamaindex", "retriever": "dense", "fusion": None, "pool_size": 50}
    assert data["n_excluded_calibration_questions"] == 150 and data["n_heldout"] == 705 - 150
    assert data["n_unrecorded_optimisation_questions"] == 0
    grid = data["coverage"]
    at = grid["levels"].index(0.9)
    assert grid["n_calibration"] == 150 and grid["n_test"] == 555
    # the calibrated level's held-out coverage lies in its exact 95% band (questions split at random)
    assert grid["band_low"][at] <= grid["coverage"][at] <= grid["band_high"][at]
    assert sum(data["set_sizes"]["methods"]["conformal"]["histogram"].values()) == 555
    assert data["scores"]["n_misses"] == json.loads(dense_calibration.read_text())["n_misses"]
    html = (out / "index.html").read_text()
    assert html.count("<img ") == 3 and "http" not in html.replace("http-equiv", "")
    _check_in_chromium(out / "index.html", 3)


@pytest.mark.integration
def test_answer_set_calibration_adds_the_generator_figure(dense_calibration, tmp_path, capsys) -> None:
    cal = RetrievalCalibration.load(dense_calibration)
    gen = tuple(np.inf if i % 7 == 0 else -0.5 for i in range(len(cal.scores_)))  # ceiling 6/7
    answers = AnswerSetCalibration.from_stages(
        cal, gen, alpha=0.5, n_samples=5, model="test", clustering={}, question_ids=cal.question_ids_
    )
    answers.save(tmp_path / "answers.json")
    out = tmp_path / "report"
    assert main(_report(tmp_path / "answers.json", out)) == 0, capsys.readouterr().err
    data = json.loads((out / "report.json").read_text())
    assert data["kind"] == "answer_set" and data["figures"][-1] == "answer_sets.png"
    assert data["answer_sets"]["coverage_ceiling"] == pytest.approx(answers.coverage_ceiling_)
    assert set(data["answer_sets"]["methods"]) == {"bonferroni", "pac", "hmp"}
    _check_in_chromium(out / "index.html", 4)


def _fails(argv: list[str], capsys, *expected: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("conformal-rag: error: ") and err.count("\n") == 1, err
    for text in expected:
        assert text in err, err


@pytest.mark.integration
def test_a_calibration_of_another_host_is_refused(dense_calibration, tmp_path, capsys) -> None:
    cal = RetrievalCalibration.load(dense_calibration)
    other = replace(cal, fingerprint_=replace(cal.fingerprint_, embedding_model="another-model"))
    other.save(tmp_path / "other.json")
    _fails(_report(tmp_path / "other.json", tmp_path / "r"), capsys, "another retrieval pipeline", "another-model")
    assert not (tmp_path / "r" / "index.html").exists()


@pytest.mark.integration
def test_other_chunks_than_the_calibrations_are_refused(dense_calibration, tmp_path, capsys) -> None:
    argv = _report(dense_calibration, tmp_path / "r", "--chunk-size", "64")
    _fails(argv, capsys, "--chunk-size", "calibration was made on")


def _unbuildable(tmp_path: Path) -> RetrievalCalibration:
    fp = Fingerprint("llamaindex", "SimpleVectorStore", "cosine", "m", 8, "cosine", "dense(default)")
    return RetrievalCalibration(0.5, 0.2, "split", "similarity", 10, 9, 0, (0.5,) * 9, fp)


def test_a_host_the_report_cannot_rebuild_is_refused(tmp_path, capsys) -> None:
    _unbuildable(tmp_path).save(tmp_path / "cal.json")
    _fails(_report(tmp_path / "cal.json", tmp_path / "r"), capsys, "cannot rebuild", "SimpleVectorStore")


def test_an_answer_set_calibration_without_a_rebuildable_retrieval_stage_is_refused(tmp_path, capsys) -> None:
    ret = _unbuildable(tmp_path)
    answers = AnswerSetCalibration.from_stages(ret, (-0.5,) * 9, alpha=0.5, n_samples=3, model="m", clustering={})
    answers.save(tmp_path / "answers.json")
    _fails(_report(tmp_path / "answers.json", tmp_path / "r"), capsys, "cannot rebuild")


def test_missing_tampered_and_foreign_files_are_refused(tmp_path, capsys) -> None:
    _fails(_report(tmp_path / "missing.json", tmp_path / "r"), capsys, "missing.json", "No such file")
    _unbuildable(tmp_path).save(tmp_path / "cal.json")
    data = json.loads((tmp_path / "cal.json").read_text())
    data["threshold"] = 0.1
    (tmp_path / "bad.json").write_text(json.dumps(data))
    _fails(_report(tmp_path / "bad.json", tmp_path / "r"), capsys, "bad.json")
    (tmp_path / "junk.json").write_text("{not json")
    _fails(_report(tmp_path / "junk.json", tmp_path / "r"), capsys, "junk.json")
    (tmp_path / "file").write_text("")
    _fails(_report(tmp_path / "cal.json", tmp_path / "file"), capsys, "not a directory")
