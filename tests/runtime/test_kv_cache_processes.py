"""Several processes write the same sample cache and judge/question cache at once, while a reader
holds read transactions open: every key of every process must land, and no "database is locked"
may escape (each writer reports that every ``put`` stored its value and nothing was logged)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.runtime.kv_cache import JsonCache

pytestmark = pytest.mark.integration

N_KEYS = 150  # per process and per cache
DEADLINE = 90.0  # seconds for the whole run (it takes a few)

WRITER = textwrap.dedent(
    """
    import json, logging, sys, time
    from pathlib import Path

    sample_path, json_path, go = sys.argv[1], sys.argv[2], sys.argv[5]
    worker, n_keys = int(sys.argv[3]), int(sys.argv[4])

    class Count(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    handler = Count()
    logging.getLogger("conformal_rag_plugins").addHandler(handler)
    report = {"worker": worker, "ok": False, "error": None, "failed_puts": 0, "warnings": []}
    try:
        from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
        from conformal_rag_plugins.answer_sets.sample_record import Sample
        from conformal_rag_plugins.runtime.kv_cache import JsonCache

        while not Path(go).exists():  # start together, so the opens race too
            time.sleep(0.005)
        samples = SampleCache(sample_path)
        judged = JsonCache(json_path)
        for i in range(n_keys):
            stored = samples.put(f"w{worker}-k{i}", [Sample(f"answer {worker}/{i}")]) is not False
            stored &= judged.put(f"w{worker}-k{i}", {"text": f"yes {worker}/{i}"}) is not False
            report["failed_puts"] += not stored
            if samples.get(f"w{worker}-k{i}") is None or judged.get(f"w{worker}-k{i}") is None:
                raise RuntimeError(f"key {i} not readable back")
        samples.close()
        judged.close()
        report["ok"] = report["failed_puts"] == 0 and not handler.messages
    except BaseException as exc:  # reported, not raised: the test reads the report
        report["error"] = repr(exc)
    report["warnings"] = handler.messages
    print(json.dumps(report), flush=True)
    """
)

READER = textwrap.dedent(
    """
    import json, sqlite3, sys, time
    from pathlib import Path

    paths, go, stop, hold = sys.argv[1:3], sys.argv[3], sys.argv[4], float(sys.argv[5])
    while not Path(go).exists():
        time.sleep(0.005)
    time.sleep(0.05)
    held, errors = 0, []
    while not Path(stop).exists():
        for path, table in zip(paths, ("samples", "kv")):
            db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            try:
                db.execute("BEGIN")  # a read transaction held open while the writers commit
                db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
                time.sleep(hold)
                db.execute("COMMIT")
                held += 1
            except sqlite3.OperationalError as exc:  # e.g. the table is not created yet
                errors.append(str(exc))
            finally:
                db.close()
        time.sleep(hold / 2)  # the reader holds a transaction part of the time
    print(json.dumps({"held": held, "errors": errors[:5]}), flush=True)
    """
)


def run_writers(tmp_path: Path, n_processes: int, *, hold: float = 0.15, n_keys: int = N_KEYS) -> dict:
    """Start ``n_processes`` writers and one reader on shared caches; their reports and the cache paths."""
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "reader.py").write_text(READER)
    sample_path, json_path = tmp_path / "cache" / "samples.sqlite", tmp_path / "cache" / "llm.sqlite"
    sample_path.parent.mkdir()  # the reader may connect before any writer opens its cache
    go, stop = tmp_path / "go", tmp_path / "stop"
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                str(tmp_path / "writer.py"),
                str(sample_path),
                str(json_path),
                str(w),
                str(n_keys),
                str(go),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(n_processes)
    ]
    reader = subprocess.Popen(
        [sys.executable, str(tmp_path / "reader.py"), str(sample_path), str(json_path), str(go), str(stop), str(hold)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(0.5)  # let the interpreters start, then release them at once
    go.touch()
    reports = []
    start = time.monotonic()
    try:
        for proc in writers:
            out, err = proc.communicate(timeout=max(1.0, DEADLINE - (time.monotonic() - start)))
            assert proc.returncode == 0 and out.strip(), err
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        stop.touch()
        for proc in [*writers, reader]:
            if proc.poll() is None and proc is not reader:
                proc.kill()
        reader_out, reader_err = reader.communicate(timeout=30)
    assert reader.returncode == 0 and reader_out.strip(), reader_err
    return {
        "writers": reports,
        "reader": json.loads(reader_out.strip().splitlines()[-1]),
        "sample_path": sample_path,
        "json_path": json_path,
        "seconds": time.monotonic() - start,
    }


@pytest.mark.parametrize("n_processes", [2, 4])
def test_processes_share_both_caches_with_a_reader_holding_transactions(tmp_path: Path, n_processes: int) -> None:
    run = run_writers(tmp_path, n_processes)
    for report in run["writers"]:
        assert report["ok"], report  # no put failed, no warning, no "database is locked" escaped
    assert run["reader"]["held"] > 0  # the reader really held read transactions meanwhile

    expected = {f"w{w}-k{i}" for w in range(n_processes) for i in range(N_KEYS)}
    with SampleCache(run["sample_path"]) as samples, JsonCache(run["json_path"]) as judged:
        assert set(samples.keys()) == expected and len(samples) == len(expected)
        assert set(judged.keys()) == expected
        assert [s.text for s in samples.get("w1-k7")] == ["answer 1/7"]
        assert judged.get(f"w{n_processes - 1}-k{N_KEYS - 1}") == {"text": f"yes {n_processes - 1}/{N_KEYS - 1}"}
    for path in (run["sample_path"], run["json_path"]):
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
