"""A native crash (SIGSEGV, what a segfault in llama.cpp looks like from outside) leaves every file loadable.

* While ``calibrate_answer_sets`` samples answers: the SQLite sample cache (with the WAL the
  crash left un-checkpointed) passes ``PRAGMA integrity_check``, every entry reads back through
  :class:`SampleCache`, no stray file appears, and a rerun in the same cache finishes with the
  calibration of an uninterrupted run in a fresh cache, asking again only what was in flight.
* While a calibration is being saved over and over (alternating two confidence levels):
  ``AnswerSetCalibration.load`` reads back exactly one of the two saved files, after each of
  several kills at different moments, and the temporary files a kill may leave beside the
  target break neither a later load nor a later save.

The drivers run in subprocesses with a fake, deterministic chat model (a control-flow test,
no real model) that sleeps a little per call and logs each completed call.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.runtime.kv_cache import JsonCache, SqliteStore

pytestmark = pytest.mark.integration

N_ITEMS = 20
N_SAMPLES = 3  # answers drawn per question: N_ITEMS * N_SAMPLES = 60 LLM calls per run
MAX_CONCURRENCY = 2
KILL_AFTER = 15  # logged LLM calls before the SIGSEGV: about a quarter of the run
MAX_REPEATED = 2  # questions whose samples may be asked again: the one in flight, and one not yet committed
SAVE_KILLS = ((3, 0.0), (15, 0.013), (40, 0.037))  # (saves seen, extra delay in seconds) before each SIGSEGV
TARGET = "answer_sets.json"
# the library's caches by file name, each read back with its own class (these runs write only the sample cache)
CACHES: dict[str, type[SqliteStore]] = {"samples.sqlite": SampleCache, "llm.sqlite": JsonCache}

DRIVER = textwrap.dedent(
    '''
    """Native-crash driver: python driver.py MODE CACHE_DIR CALL_LOG OUT_DIR (MODE: calibrate | save)."""
    import asyncio, hashlib, os, re, resource, sys

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the SIGSEGV must not leave a core file behind

    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.retrievers import BaseRetriever

    from conformal_rag_plugins.datasets.examples import CalibrationExample
    from conformal_rag_plugins.answer_sets.options import RetrievalStageOptions, SamplingOptions, SplitOptions
    from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
    from conformal_rag_plugins.langchain import calibrate_answer_sets

    MODE, CACHE_DIR, CALL_LOG, OUT_DIR = sys.argv[1:5]
    N, N_SAMPLES, CONCURRENCY = (int(os.environ[k]) for k in ("N_ITEMS", "N_SAMPLES", "MAX_CONCURRENCY"))
    DELAY = 0.03


    def text(i: int) -> str:
        return (f"Item {i:02d}: the harbour of Zorvik{i} was rebuilt by the engineer Talmar{i} "
                f"after the great storm, and the town grew rich on its trade in salt and wool.")


    class FakeChat(BaseChatModel):
        """Deterministic in the prompt: the chunk's engineer, except a wrong name for every tenth question."""

        model_name: str = "fake-native-crash"

        @property
        def _llm_type(self) -> str:
            return "fake-native-crash"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            raise NotImplementedError

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            prompt = "\\n".join(str(m.content) for m in messages)
            await asyncio.sleep(DELAY)
            with open(CALL_LOG, "a", encoding="utf-8") as log:
                log.write(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16] + "\\n")
                log.flush()
            i = int(re.findall(r"Talmar(\\d+)", prompt)[-1])
            answer = "Bramwell" if i % 10 == 3 else f"Talmar{i}"
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


    class Ranking(BaseRetriever):
        """Five chunks with scores; the one with the answer at rank i % 4."""

        def _get_relevant_documents(self, query, *, run_manager=None):
            i = int(re.findall(r"Zorvik(\\d+)", query)[-1])
            order = [(i + d) % N for d in (7, 3, 1, 2)]
            order.insert(i % 4, i)
            return [Document(page_content=text(j), id=f"n{j}",
                             metadata={"id": f"n{j}", "score": 0.9 - 0.1 * r - 0.004 * i})
                    for r, j in enumerate(order)]


    def calibrate(confidence_level: float):
        examples = [CalibrationExample(f"Who rebuilt the harbour of Zorvik{i}?", gold_ids=(f"n{i}",),
                                       answers=(f"Talmar{i}",)) for i in range(N)]
        cache = SampleCache(os.path.join(CACHE_DIR, "samples.sqlite"))
        return calibrate_answer_sets(
            Ranking(), FakeChat(), examples, confidence_level=confidence_level,
            sampling=SamplingOptions(
                n_samples=N_SAMPLES, cache=cache, max_concurrency=CONCURRENCY, progress=False, pilot=None
            ),
            split=SplitOptions(random_state=0), retrieval=RetrievalStageOptions(pool_size=5),
        )


    if MODE == "calibrate":
        calibrate(0.6).save(os.path.join(OUT_DIR, "calibration.json"))
    else:  # save two calibrations to the same file in turn until killed, one flushed log line per save
        cals = [calibrate(0.6), calibrate(0.7)]
        cals[0].save(os.path.join(OUT_DIR, "a.json"))
        cals[1].save(os.path.join(OUT_DIR, "b.json"))
        target = os.path.join(os.path.dirname(OUT_DIR), os.environ["TARGET"])
        with open(os.path.join(OUT_DIR, "saves.log"), "a", encoding="utf-8") as saves:
            for n in range(10**9):
                cals[n % 2].save(target)
                saves.write(f"{n}\\n")
                saves.flush()
    '''
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(
        N_ITEMS=str(N_ITEMS),
        N_SAMPLES=str(N_SAMPLES),
        MAX_CONCURRENCY=str(MAX_CONCURRENCY),
        TARGET=TARGET,
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def _start(tmp_path: Path, mode: str, cache_dir: Path, log: Path, out_dir: Path) -> subprocess.Popen[str]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), mode, str(cache_dir), str(log), str(out_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=tmp_path,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err


def _segfault_when(proc: subprocess.Popen[str], ready: Callable[[], bool], delay: float = 0.0) -> None:
    """Send SIGSEGV once ``ready()`` (and ``delay`` more seconds); the driver must die of it."""
    deadline = time.monotonic() + 60.0
    while not ready():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the driver did not get far enough"
        time.sleep(0.002)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGSEGV)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGSEGV, err


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _same_calibration(a: AnswerSetCalibration, b: AnswerSetCalibration) -> bool:
    """Equal in every field but the creation times of both stages (the fields ``==`` skips included)."""

    def timeless(cal: AnswerSetCalibration) -> AnswerSetCalibration:
        return replace(cal, created_at_="", retrieval_=replace(cal.retrieval_, created_at_=""))

    return timeless(a) == timeless(b) and (a.optimisation_, a.question_ids_) == (b.optimisation_, b.question_ids_)


def _check_cache_dir(cache_dir: Path) -> dict[str, int]:
    """Every file of ``cache_dir`` belongs to a known cache, which is intact and reads back in full."""
    names = sorted(p.name for p in cache_dir.iterdir())
    databases = [n for n in names if not n.endswith(("-wal", "-shm", "-journal"))]
    assert set(databases) <= set(CACHES), names
    assert {n.rsplit("-", 1)[0] for n in names} <= set(databases), names  # no orphan journal
    entries: dict[str, int] = {}
    for name in databases:
        with closing(sqlite3.connect(cache_dir / name)) as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)], name
        with CACHES[name](cache_dir / name) as cache:
            keys = cache.keys()
            for key in keys:
                value = cache.get(key)  # type: ignore[attr-defined]
                assert value is not None, (name, key)
                if isinstance(cache, SampleCache):
                    assert len(value) == N_SAMPLES and all(re.fullmatch(r"Talmar\d+|Bramwell", s.text) for s in value)
            entries[name] = len(keys)
    return entries


def test_segfault_while_sampling_leaves_a_loadable_cache_and_the_rerun_matches(tmp_path: Path) -> None:
    (tmp_path / "driver.py").write_text(DRIVER)
    crashed, fresh = tmp_path / "crashed", tmp_path / "fresh"
    before, after, full = tmp_path / "calls_before.log", tmp_path / "calls_after.log", tmp_path / "calls_full.log"

    # the reference: an uninterrupted run in its own cache (started first, it overlaps the crash run)
    reference = _start(tmp_path, "calibrate", fresh / "cache", full, fresh)
    proc = _start(tmp_path, "calibrate", crashed / "cache", before, crashed)
    try:
        _segfault_when(proc, lambda: len(_lines(before)) >= KILL_AFTER)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert not (crashed / "calibration.json").exists()
    names = {p.name for p in (crashed / "cache").iterdir()}
    assert "samples.sqlite-wal" in names  # the crash left its writes in the WAL, not checkpointed

    entries = _check_cache_dir(crashed / "cache")
    assert 0 < entries["samples.sqlite"] < N_ITEMS  # killed part-way, with some questions stored

    _finish(_start(tmp_path, "calibrate", crashed / "cache", after, crashed))
    _finish(reference)
    resumed = AnswerSetCalibration.load(crashed / "calibration.json")
    uninterrupted = AnswerSetCalibration.load(fresh / "calibration.json")
    assert _same_calibration(resumed, uninterrupted)
    assert (resumed.retrieval_threshold_, resumed.generation_threshold_) == (
        uninterrupted.retrieval_threshold_,
        uninterrupted.generation_threshold_,
    )
    assert resumed.guaranteed_ and len(resumed.generation_scores_) == N_ITEMS
    assert _check_cache_dir(crashed / "cache") == _check_cache_dir(fresh / "cache") == {"samples.sqlite": N_ITEMS}

    calls_before, calls_after, calls_full = Counter(_lines(before)), Counter(_lines(after)), Counter(_lines(full))
    assert len(calls_full) == N_ITEMS and set(calls_full.values()) == {N_SAMPLES}
    assert set(calls_before) | set(calls_after) == set(calls_full)
    repeated = set(calls_before) & set(calls_after)  # asked again: not yet stored at the crash
    assert len(repeated) <= MAX_REPEATED, repeated
    assert calls_after.total() == N_SAMPLES * (N_ITEMS - entries["samples.sqlite"])


def test_segfault_while_saving_leaves_a_loadable_calibration(tmp_path: Path) -> None:
    (tmp_path / "driver.py").write_text(DRIVER)
    target = tmp_path / TARGET
    leftovers: list[str] = []
    for run, (n_saves, delay) in enumerate(SAVE_KILLS):
        out = tmp_path / f"run{run}"
        proc = _start(tmp_path, "save", tmp_path / "cache", tmp_path / "calls.log", out)
        try:
            _segfault_when(proc, lambda: len(_lines(out / "saves.log")) >= n_saves, delay)  # noqa: B023
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        saved = [(out / name).read_bytes() for name in ("a.json", "b.json")]
        assert saved[0] != saved[1]
        assert target.read_bytes() in saved  # one complete file of this run, never a mixture or a stub
        loaded = AnswerSetCalibration.load(target)
        reference = AnswerSetCalibration.load(out / ("a.json", "b.json")[saved.index(target.read_bytes())])
        assert _same_calibration(loaded, reference) and loaded.created_at_ == reference.created_at_

        # a kill during a save may leave that save's temporary sibling (named with the writer's pid); nothing
        # removes it, so they accumulate, one per unlucky kill at most, and are never read
        temps = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(f".{TARGET}."))
        new = [name for name in temps if name not in leftovers]
        assert len(new) <= 1 and all(f".{proc.pid}." in name for name in new), temps
        leftovers = temps

    # a later save and load at the same path work with whatever temporary files the kills left
    final = replace(AnswerSetCalibration.load(target), created_at_="2000-01-01T00:00:00+00:00")
    final.save(target)
    assert AnswerSetCalibration.load(target) == final
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(f".{TARGET}.")) == leftovers
