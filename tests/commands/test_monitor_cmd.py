"""``conformal-rag monitor`` on small files: the JSON report, both frameworks, and one-line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

N_CAL = 40
N_STREAM = 12


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory, squad_entries, squad_questions) -> dict[str, Path]:
    """The first 40 paragraphs as corpus, 40 of their questions to calibrate on, 12 others as the stream."""
    tmp = tmp_path_factory.mktemp("monitor_cli")
    entries = squad_entries[:40]
    ids = {e.id for e in entries}
    qs = [q for q in squad_questions if q.gold_ids and q.gold_ids[0] in ids]
    rows = [
        {"id": str(i), "question": q.question, "answers": list(q.gold_texts), "context_id": q.gold_ids[0]}
        for i, q in enumerate(qs[: N_CAL + N_STREAM])
    ]
    return {
        "corpus": _jsonl(tmp / "corpus.jsonl", [{"id": e.id, "text": e.text} for e in entries]),
        "qa": _jsonl(tmp / "cal.jsonl", rows[:N_CAL]),
        "stream": _jsonl(tmp / "stream.jsonl", [{"question": r["question"]} for r in rows[N_CAL:]]),
    }


def _argv(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "monitor",
        "--corpus",
        str(files["corpus"]),
        "--qa",
        str(files["qa"]),
        "--stream",
        str(files["stream"]),
        "--alpha",
        "0.2",
        "--json",
        str(out),
        *extra,
    ]


@pytest.mark.integration
@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_monitor_writes_the_report(files, tmp_path, capsys, framework) -> None:
    out, state = tmp_path / "report.json", tmp_path / "monitor.json"
    argv = _argv(files, out, "--delta", "0.05", "--framework", framework, "--save-monitor", str(state))
    assert main([*argv, "--retriever", "dense"]) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    assert {"n_stream", "alarm_at", "martingale", "statistic", "p_values", "delta", "threshold"} <= set(report)
    assert report["n_stream"] == N_STREAM == len(report["martingale"]) == len(report["p_values"])
    assert report["statistic"] == "top1" and report["delta"] == 0.05 and report["threshold"] == pytest.approx(20.0)
    assert report["alarm_at"] is None or 0 <= report["alarm_at"] < N_STREAM
    assert report["framework"] == framework and report["n_calibration"] == N_CAL and report["retriever"] == "dense"
    assert report["n_reference"] == N_CAL  # every question of --qa (all answerable here)
    saved = json.loads(state.read_text())
    assert saved["kind"] == "conformal_rag_plugins.conformal_monitor" and len(saved["stream"]) == N_STREAM
    assert saved["calibration"]["threshold"] == report["calibration_threshold"]
    # --save-monitor also writes the calibration the state needs to be resumed
    cal = RetrievalCalibration.load(tmp_path / "monitor.calibration.json")
    assert ConformalMonitor.load(state, cal).n_stream == N_STREAM
    assert "stream queries" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--delta", "1.5"], "delta must lie strictly between 0 and 1"),
        (["--delta", "0"], "delta must lie strictly between 0 and 1"),
        (["--alpha", "2"], "alpha must lie strictly between 0 and 1"),
        (["--pool-size", "0"], "pool_size must be an integer >= 1"),
    ],
)
def test_bad_options_are_one_line_exit_2(files, tmp_path, capsys, extra, message) -> None:
    assert main([*_argv(files, tmp_path / "r.json"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("conformal-rag: error:")


def test_bad_stream_file_names_file_and_line(files, tmp_path, capsys) -> None:
    bad = _jsonl(tmp_path / "bad.jsonl", [{"question": "ok?"}, {"text": "no question"}])
    argv = _argv(files, tmp_path / "r.json")
    argv[argv.index("--stream") + 1] = str(bad)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: 'question' is missing" in err and err.count("\n") == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    argv[argv.index("--stream") + 1] = str(empty)
    assert main(argv) == 2
    assert "holds no questions" in capsys.readouterr().err


def test_imports_for_users() -> None:
    import conformal_rag_plugins

    assert conformal_rag_plugins.ConformalMonitor is ConformalMonitor
    assert RetrievalCalibration is conformal_rag_plugins.RetrievalCalibration
