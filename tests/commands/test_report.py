"""``conformal-rag report`` on the real stack: files, JSON, the page in headless Chromium, bad inputs."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/report/page.py

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, StageProvenance
from conformal_rag_plugins.cli import main
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.datasets.examples import save_examples
from conformal_rag_plugins.local.corpus import bundled_questions
from conformal_rag_plugins.local.data import bundled_corpus_paths
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

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


def _check_in_chromium(page_path: Path, n_figures: int) -> dict:
    """Open the page offline in headless Chromium; every ``<img>`` must have loaded.

    Returns what a reader sees: the verdict line, the element right after the title, the host
    table's rows, the listed levels above their band and the figure titles.
    """
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
            seen = page.evaluate(
                """() => {
                  const v = document.querySelector('#verdict');
                  const host = document.querySelector('table#host');
                  return {
                    verdict: v ? v.innerText : null,
                    verdict_class: v ? v.className : null,
                    after_title: document.querySelector('h1').nextElementSibling.id,
                    host: host && Object.fromEntries(
                      [...host.rows].map(r => [r.cells[0].innerText, r.cells[1].innerText])),
                    ties: [...document.querySelectorAll('#ties li')].map(li => li.innerText),
                    figures: [...document.querySelectorAll('figure h2')].map(h => h.innerText),
                  };
                }"""
            )
        finally:
            browser.close()
    assert len(images) == n_figures
    assert all(img["ok"] and img["w"] > 0 and img["h"] > 0 for img in images), images
    return seen


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
    # the verdict: on stdout, in report.json and as the page's first line, worked out from the same numbers
    verdict = data["verdict"]
    lo, hi, cov = grid["band_low"][at], grid["band_high"][at], grid["coverage"][at]
    assert verdict["status"] == "inside" and verdict["consistent"] is True  # (lo <= cov <= hi, asserted above)
    assert verdict["text"] == (
        f"held-out coverage {cov:.3f} at target 0.9, inside the 95% band [{lo:.3f}, {hi:.3f}]: "
        "consistent with the guarantee"
    )
    assert verdict["text"] in printed
    seen = _check_in_chromium(out / "index.html", 3)
    assert seen["after_title"] == "verdict" and seen["verdict"] == verdict["text"] + "."
    assert seen["verdict_class"] == "verdict inside"
    # the host as a table, not raw JSON
    assert seen["host"]["framework"] == "llamaindex" and seen["host"]["retriever"] == "dense"
    assert seen["host"]["pool size (candidates per query)"] == "50"
    model = json.loads(dense_calibration.read_text())["fingerprint"]["embedding_model"]
    assert seen["host"]["embedding model"].startswith(model)
    assert not any("{" in v for v in seen["host"].values())
    # the scores figure is an ECDF; the levels above their band are listed, each explained
    assert "Calibration scores: empirical CDF and threshold" in seen["figures"]
    above = [lv for lv, c, h in zip(grid["levels"], grid["coverage"], grid["band_high"], strict=True) if h and c > h]
    assert [t["level"] for t in data["tie_levels"]] == above and len(seen["ties"]) == len(above)
    # the relative score ties at 0 (every top-1 hit): the low levels above the band are explained by ties
    assert above and all(t["ties"] and "Scores tie at the threshold" in t["text"] for t in data["tie_levels"])


@pytest.mark.integration
def test_answer_set_calibration_adds_the_generator_figure(dense_calibration, tmp_path, capsys) -> None:
    cal = RetrievalCalibration.load(dense_calibration)
    gen = tuple(np.inf if i % 7 == 0 else -0.5 for i in range(len(cal.scores_)))  # ceiling 6/7
    answers = AnswerSetCalibration.from_stages(
        cal, gen, alpha=0.5, n_samples=5, model="test", clustering={}, provenance=StageProvenance(cal.question_ids_)
    )
    answers.save(tmp_path / "answers.json")
    out = tmp_path / "report"
    assert main(_report(tmp_path / "answers.json", out)) == 0, capsys.readouterr().err
    data = json.loads((out / "report.json").read_text())
    assert data["kind"] == "answer_set" and data["figures"][-1] == "answer_sets.png"
    assert data["answer_sets"]["coverage_ceiling"] == pytest.approx(answers.coverage_ceiling_)
    assert set(data["answer_sets"]["methods"]) == {"bonferroni", "pac", "hmp"}
    seen = _check_in_chromium(out / "index.html", 4)
    assert data["verdict"]["text"].startswith("retrieval-stage held-out coverage")
    assert seen["verdict"] == data["verdict"]["text"] + "."


def _rescaled(cal: RetrievalCalibration, factor: float) -> RetrievalCalibration:
    """The same calibration with every relative score multiplied by ``factor`` (threshold recomputed from them)."""
    scores = tuple(s * factor for s in cal.scores_)
    return replace(cal, scores_=scores, threshold_=conformal_quantile(scores, cal.alpha_))


@pytest.mark.integration
def test_a_too_low_threshold_is_judged_below_the_band(dense_calibration, tmp_path, capsys) -> None:
    """A calibration whose stored scores are a fifth of the host's (so its threshold is too low) loads through
    the public path, and the report says plainly that its held-out coverage is not consistent with the
    guarantee; the page's first line says the same."""
    low = _rescaled(RetrievalCalibration.load(dense_calibration), 0.2)
    low.save(tmp_path / "low.json")
    out = tmp_path / "report"
    assert main(_report(tmp_path / "low.json", out)) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    data = json.loads((out / "report.json").read_text())
    grid = data["coverage"]
    at = grid["levels"].index(0.9)
    assert grid["coverage"][at] < grid["band_low"][at]
    assert data["verdict"]["status"] == "below" and data["verdict"]["consistent"] is False
    assert "below the 95% band" in printed and "not consistent with the guarantee" in printed
    seen = _check_in_chromium(out / "index.html", 3)
    assert seen["verdict_class"] == "verdict below" and "not consistent with the guarantee" in seen["verdict"]


@pytest.fixture(scope="module")
def tuned_calibration(tmp_path_factory) -> Path:
    """``conformal-rag calibrate`` of a tuned hybrid host on 150 seeded random questions."""
    tmp = tmp_path_factory.mktemp("tuned")
    questions = list(bundled_questions(True))
    picked = np.random.default_rng(1).choice(len(questions), 150, replace=False)
    save_examples([questions[i] for i in sorted(picked)], tmp / "labelled.jsonl")
    out = tmp / "calibration.json"
    argv = ["calibrate", *CORPUS, "--questions", str(tmp / "labelled.jsonl"), "--retriever", "hybrid", "--alpha", "0.1",
            "--persist-dir", str(tmp / "chroma"), "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    return out


@pytest.mark.integration
def test_the_questions_that_tuned_the_host_are_left_out(tuned_calibration, tmp_path, capsys) -> None:
    cal = RetrievalCalibration.load(tuned_calibration)
    n_opt = cal.selection_["n_optimisation"]
    assert n_opt == 45 and cal.n_calibration_ == 105
    out = tmp_path / "report"
    assert main(_report(tuned_calibration, out)) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    data = json.loads((out / "report.json").read_text())
    assert data["n_excluded_calibration_questions"] == 105 and data["n_excluded_optimisation_questions"] == 45
    assert data["n_heldout"] == 705 - 150 and data["coverage"]["n_test"] == 555
    assert data["n_unrecorded_optimisation_questions"] == 0 and "note:" not in printed


@pytest.mark.integration
def test_old_calibration_files_still_report(tuned_calibration, dense_calibration, tmp_path, capsys) -> None:
    """A tuned file saved before the tuning questions were recorded, and a schema-1 dense file."""
    cal = RetrievalCalibration.load(tuned_calibration)
    selection = {k: v for k, v in cal.selection_.items() if k != "optimisation_question_ids"}
    replace(cal, selection_=selection).save(tmp_path / "old_tuned.json")
    out = tmp_path / "r1"
    assert main(_report(tmp_path / "old_tuned.json", out)) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    data = json.loads((out / "report.json").read_text())
    assert data["n_unrecorded_optimisation_questions"] == 45 and data["n_heldout"] == 705 - 105
    assert "re-run calibrate to record them" in printed and data["verdict"]["status"] in {"inside", "above", "below"}
    dense = RetrievalCalibration.load(dense_calibration)
    v1 = replace(dense, schema_version_=1, gold_ranks_=(), corpus_={})
    v1.save(tmp_path / "v1.json")
    assert json.loads((tmp_path / "v1.json").read_text())["schema_version"] == 1
    assert main(_report(tmp_path / "v1.json", tmp_path / "r2")) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "r2" / "report.json").read_text())["verdict"]["status"] == "inside"


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


# Issue 41 section 6: the report's files are one unit (see test_report_one_unit.py for the fast probes)


@pytest.mark.integration
@pytest.mark.parametrize("name", ["index.html", "report.json"])
def test_a_report_never_writes_figures_before_refusing_a_target(dense_calibration, tmp_path, capsys, name) -> None:
    out = tmp_path / "r"
    out.mkdir()
    if name == "index.html":
        os.mkfifo(out / name)
    else:
        (out / name).mkdir()
    _fails(_report(dense_calibration, out), capsys, str(out / name))
    assert sorted(p.name for p in out.iterdir()) == [name]  # no PNG beside it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.integration
def test_a_report_replaces_an_older_one_whole(dense_calibration, tmp_path, capsys) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "answer_sets.png").write_bytes(b"a figure of an older answer-set report")
    (out / "report.json").write_text('{"old": true}')
    assert main(_report(dense_calibration, out)) == 0
    assert not (out / "answer_sets.png").exists()  # no stale figure beside the new report
    report = json.loads((out / "report.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.html", "report.json", *report["figures"]])
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    capsys.readouterr()
