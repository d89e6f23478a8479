"""Issue 41 section 6, half-written outputs: a run's files are written as one unit, even under ``kill -9``.

``write_unit`` stages every file in a folder beside the output folder and swaps it in at once. A
process killed while staging leaves the output folder exactly as it was (old report.json, old
figures: never new PNGs beside an old report.json), and the next run removes what it left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conformal_rag_plugins.runtime.atomic import write_unit

OLD = {"report.json": b'{"old": true}', "index.html": b"<p>old</p>", "coverage.png": b"old png"}
NAMES = ("report.json", "index.html", "coverage.png", "scores.png")

CHILD = r"""
import sys, time
from collections.abc import Mapping
from conformal_rag_plugins.runtime.atomic import write_unit

class Slow(Mapping):
    # the new figures first, then a pause (the process is killed here), then the JSON
    def __init__(self):
        self.data = {"coverage.png": b"new png", "scores.png": b"new png", "report.json": b'{"new": true}'}
    def __getitem__(self, key):
        return self.data[key]
    def __iter__(self):
        return iter(self.data)
    def __len__(self):
        return len(self.data)
    def items(self):
        for i, (k, v) in enumerate(self.data.items()):
            if i == 2:
                print("staged", flush=True)
                time.sleep(60)
            yield k, v

write_unit(sys.argv[1], Slow(), owned=sys.argv[2:])
"""


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_kill_9_while_writing_leaves_the_previous_report_whole(tmp_path) -> None:
    out = tmp_path / "report"
    write_unit(out, OLD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out), *NAMES], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "staged"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert _contents(out) == OLD  # no new PNG beside the old report.json
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "report"]
    assert leftovers and all(name.endswith(".run.tmp") for name in leftovers)  # the killed run's staging folder
    new = {"report.json": b'{"new": true}', "index.html": b"<p>new</p>"}
    write_unit(out, new, owned=NAMES)
    assert _contents(out) == new  # the old figure went with the old report
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # the stale staging folder removed


def test_a_failure_while_writing_leaves_the_previous_report_whole(tmp_path, monkeypatch) -> None:
    out = tmp_path / "report"
    write_unit(out, OLD)
    real_fsync = os.fsync
    calls = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space"):
        write_unit(out, {"coverage.png": b"new", "report.json": b"{}"}, owned=NAMES)
    assert _contents(out) == OLD and [p.name for p in tmp_path.iterdir()] == ["report"]


def test_the_users_own_files_in_the_folder_are_kept(tmp_path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    write_unit(out, {"report.json": b"{}"}, owned=NAMES)
    assert _contents(out) == {"notes.txt": b"mine", "report.json": b"{}"}


def test_a_target_that_cannot_be_replaced_is_refused_before_writing(tmp_path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    os.mkfifo(out / "index.html")
    with pytest.raises(FileExistsError):
        write_unit(out, {"coverage.png": b"new", "index.html": b"<p>new</p>"})
    assert [p.name for p in out.iterdir()] == ["index.html"] and [p.name for p in tmp_path.iterdir()] == ["report"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_files_a_killed_writer_left_are_removed_by_the_next_write(tmp_path) -> None:
    """A single-file write (``atomic_path``) killed before its rename left ``.NAME.PID.XXXXXXXX.tmp`` for good."""
    from conformal_rag_plugins.runtime.atomic import atomic_write_text

    target = tmp_path / "state.json"
    stale = tmp_path / f".state.json.{_dead_pid()}.0123abcd.tmp"
    stale.write_text('{"half": ')
    live = tmp_path / f".state.json.{os.getpid()}.89abcdef.tmp"  # a writer still running: kept
    live.write_text("{}")
    other = tmp_path / f".other.json.{_dead_pid()}.0123abcd.tmp"  # another file's: not this write's business
    other.write_text("{}")
    atomic_write_text(target, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, live.name, other.name])
