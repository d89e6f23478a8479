"""Issue 34 point 7: progress bars honour TQDM_DISABLE and --quiet, --persist-dir help tells the truth, ``monitor``
prints its alarm level and 1-based query numbers, the demo says where it saved each file once.

Each test fails on the code before the fix: the library passed ``disable=False`` to tqdm (which then
ignores ``TQDM_DISABLE``), the help named ``~/.cache`` whatever ``$CONFORMAL_RAG_CACHE`` said, and
``monitor`` printed the 0-based index without the alarm level.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/runtime/progress.py

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import _parser, main
from conformal_rag_plugins.commands import monitor_cmd
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, collect_observations


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _collect(progress: bool) -> None:
    examples = [CalibrationExample(f"q{i}?", gold_ids=("a",), id=f"q{i}") for i in range(3)]
    pool = CandidatePool.from_unsorted(["a", "b"], ["A.", "B."], [0.9, 0.1])
    collect_observations(examples, lambda q: pool, progress=progress)


@pytest.mark.parametrize("value", ["1", "True"])
def test_tqdm_disable_silences_the_librarys_progress_bars(monkeypatch, capsys, value) -> None:
    monkeypatch.setenv("TQDM_DISABLE", value)
    _collect(progress=True)
    assert "calibrating" not in capsys.readouterr().err


def test_progress_bars_still_show_without_tqdm_disable(monkeypatch, capsys) -> None:
    """The control: the same call draws its bar when nothing turns it off, and none with progress=False."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    _collect(progress=True)
    assert "calibrating" in capsys.readouterr().err
    _collect(progress=False)
    assert "calibrating" not in capsys.readouterr().err


def test_every_tqdm_call_of_the_library_goes_through_progress_bar() -> None:
    root = Path(__file__).resolve().parents[2] / "conformal_rag_plugins"
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "progress.py" and "from tqdm" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


@pytest.mark.parametrize("command", ["demo", "evaluate"])
def test_quiet_turns_the_progress_bars_off(command) -> None:
    parser = _subcommands()[command]
    assert any("--quiet" in a.option_strings for a in parser._actions)


def test_persist_dir_help_names_the_cache_variable() -> None:
    with_persist = {
        name: action
        for name, parser in _subcommands().items()
        for action in parser._actions
        if "--persist-dir" in action.option_strings
    }
    assert set(with_persist) >= {"demo", "calibrate"}
    for name, action in with_persist.items():
        assert "$CONFORMAL_RAG_CACHE/chroma" in action.help, (name, action.help)
    (cache,) = [a for a in _subcommands()["label"]._actions if "--cache" in a.option_strings]
    assert "$CONFORMAL_RAG_CACHE" in cache.help


def test_monitor_prints_the_alarm_level_and_counts_queries_from_one(monkeypatch, tmp_path, capsys) -> None:
    report = {
        "alarm_at": 7,
        "alarm_query": 8,
        "n_stream": 20,
        "n_stream_new": 20,
        "resumed_from": None,
        "statistic": "top1",
        "score_source": "dense",
        "delta": 0.01,
        "threshold": 100.0,
        "n_reference": 30,
        "martingale": [1.0, 120.5],
        "saved_calibration": None,
    }
    monkeypatch.setattr(monitor_cmd, "run_monitor", lambda request: report)
    argv = ["monitor", "--corpus", "c.jsonl", "--stream", "s.jsonl", "--json", str(tmp_path / "m.json")]
    assert main(argv) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "ALARM at query 8" in line  # the 8th query, index 7
    assert "alarm level 1/delta = 100" in line
    assert "top1 statistic of the dense scores" in line  # which scores the monitor watched (issue 41)
    report["alarm_at"] = report["alarm_query"] = None
    assert main(argv) == 0
    assert "no alarm" in capsys.readouterr().out


def test_monitor_json_keeps_alarm_at_and_adds_alarm_query() -> None:
    import inspect

    source = inspect.getsource(monitor_cmd.run_monitor)
    assert '"alarm_at": monitor.alarm_at,' in source
    assert '"alarm_query": None if monitor.alarm_at is None else monitor.alarm_at + 1,' in source
