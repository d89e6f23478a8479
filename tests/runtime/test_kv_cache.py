"""The SQLite caches under locks: WAL readers never block a write, busy errors are retried with
backoff, a write that still fails only warns (the paid answer is kept), and async callers do their
cache I/O off the event loop."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conformal_rag_plugins.answer_sets.concurrent_draws import draw_samples
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.labelling.llm_judge import LLMJudge
from conformal_rag_plugins.labelling.question_gen import agenerate_questions
from conformal_rag_plugins.runtime.kv_cache import JsonCache, is_busy_error, retry_busy

LOGGER = "conformal_rag_plugins"
FAST = {"busy_timeout": 0.05, "retries": 2, "backoff": 0.01}  # give up within ~0.2 s


@contextmanager
def write_locked(path: Path, release_after: float | None = None, mode: str = "IMMEDIATE") -> Iterator[None]:
    """Another connection holds the write lock of ``path`` (released after ``release_after`` s, else at exit)."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute(f"BEGIN {mode}")
    timer = threading.Timer(release_after, lambda: db.execute("COMMIT")) if release_after is not None else None
    if timer is not None:
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.join()
        else:
            db.execute("COMMIT")
        db.close()


def test_file_caches_use_wal_and_memory_caches_still_work(tmp_path: Path) -> None:
    for cache in (JsonCache(tmp_path / "a" / "llm.sqlite"), SampleCache(tmp_path / "b" / "samples.sqlite")):
        with cache, sqlite3.connect(cache.path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    memory = JsonCache(":memory:")
    assert memory.put("k", [1, "two"]) and memory.get("k") == [1, "two"] and memory.keys() == ["k"]


def test_a_reader_holding_a_transaction_does_not_block_a_put(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path / "llm.sqlite", **FAST)
    cache.put("old", {"text": "no"})
    reader = sqlite3.connect(cache.path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM kv").fetchone()[0] == 1  # a read transaction is open
    start = time.monotonic()
    assert cache.put("new", {"text": "yes"}) is True
    assert time.monotonic() - start < 0.5
    assert reader.execute("SELECT COUNT(*) FROM kv").fetchone()[0] == 1  # its snapshot is unchanged
    reader.execute("COMMIT")
    reader.close()
    assert cache.get("new") == {"text": "yes"}


def test_a_put_waits_out_a_writer_with_retries_and_backoff(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite", busy_timeout=0.05, retries=8, backoff=0.05)
    with write_locked(tmp_path / "samples.sqlite", release_after=0.3):
        assert cache.put("k", [Sample("Rollo")]) is True  # longer than the busy timeout: the retries did it
    assert [s.text for s in cache.get("k")] == ["Rollo"]


def test_a_put_that_still_fails_warns_and_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = JsonCache(tmp_path / "llm.sqlite", **FAST)
    with caplog.at_level(logging.WARNING, logger=LOGGER), write_locked(tmp_path / "llm.sqlite"):
        assert cache.put("k", {"text": "yes"}) is False
    assert "Cache write" in caplog.text and "locked" in caplog.text
    assert cache.get("k") is None and cache.put("k", {"text": "yes"}) is True  # works once the lock is gone
    assert cache.put("bad", {"not json": object()}) is False
    cache.close()
    assert cache.put("k2", {"text": "no"}) is False and cache.get("k") is None  # a closed cache: warnings, a miss


def test_opening_tolerates_a_concurrent_lock_while_switching_to_wal(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with sqlite3.connect(path) as db:  # an existing cache in the old rollback-journal mode
        db.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO kv VALUES ('k', '1')")
    with write_locked(path, release_after=0.3, mode="EXCLUSIVE"):
        cache = JsonCache(path, busy_timeout=0.05, retries=8, backoff=0.05)
    assert cache.get("k") == 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_opening_gives_up_after_the_bounded_retries(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    sqlite3.connect(path).close()
    with write_locked(path, mode="EXCLUSIVE"), pytest.raises(sqlite3.OperationalError, match="locked"):
        JsonCache(path, **FAST)  # nothing paid yet, so failing loudly here is right


def test_retry_busy_retries_only_busy_errors() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("no such table: kv")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_busy(broken, backoff=0.001)
    assert len(calls) == 1
    assert is_busy_error(sqlite3.OperationalError("database is busy"))


class _FailingJsonCache(JsonCache):
    """Every write fails as a locked database would after its retries."""

    def put_text(self, key: str, text: str) -> bool:
        def write() -> None:
            raise sqlite3.OperationalError("database is locked")

        try:
            retry_busy(write, retries=1, backoff=0.001)
        except sqlite3.OperationalError as exc:
            logging.getLogger(LOGGER).warning("Cache write failed (%s)", exc)
            return False
        return True  # pragma: no cover


def test_paid_answers_survive_a_failing_cache_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def llm(prompt: str) -> str:
        return ' yes {"question": "Who led the Normans?", "answer": "Rollo"}'

    chunks = [CorpusEntry("Normans#0", "The Normans were led by Rollo, a Viking chief of great renown.")]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        judge = LLMJudge(llm, model="fake", cache=_FailingJsonCache(":memory:"))
        assert asyncio.run(judge("Who?", "Rollo", "Rollo led them.")) is True and judge.llm_calls == 1
        examples, report = asyncio.run(agenerate_questions(chunks, llm, 1, cache=_FailingJsonCache(":memory:")))
        assert [e.answers for e in examples] == [("Rollo",)] and report.llm_calls == 1

        locked = SampleCache(tmp_path / "samples.sqlite", **FAST)

        async def once() -> Sample:
            return Sample("Rollo")

        with write_locked(tmp_path / "samples.sqlite"):
            got = asyncio.run(
                draw_samples(once, n=2, max_concurrency=2, retries=0, timeout=None, cache=locked, key="k")
            )
        assert [s.text for s in got] == ["Rollo", "Rollo"]
    assert caplog.text.count("Cache write") == 3


class _ThreadRecorder:
    """Records the threads a cache's ``get``/``put`` run on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def wrap(self, cache: Any) -> Any:
        get, put = cache.get, cache.put

        def recorded_get(key: str, *check: Any) -> Any:  # check: what the row must hold (n, or a validator)
            self.threads.append(threading.get_ident())
            return get(key, *check)

        def recorded_put(key: str, value: Any) -> bool:
            self.threads.append(threading.get_ident())
            return put(key, value)

        cache.get, cache.put = recorded_get, recorded_put
        return cache


def test_async_callers_do_cache_io_off_the_event_loop() -> None:
    recorder = _ThreadRecorder()
    loop_threads: list[int] = []

    async def llm(prompt: str) -> str:
        loop_threads.append(threading.get_ident())
        return '{"question": "Who led the Normans?", "answer": "Rollo"} yes'

    async def once() -> Sample:
        loop_threads.append(threading.get_ident())
        return Sample("Rollo")

    async def run_all() -> None:
        judge = LLMJudge(llm, model="fake", cache=recorder.wrap(JsonCache(":memory:")))
        await judge("Who?", "Rollo", "Rollo led them.")
        await judge("Who?", "Rollo", "Rollo led them.")  # a hit
        chunks = [CorpusEntry("Normans#0", "The Normans were led by Rollo, a Viking chief of great renown.")]
        await agenerate_questions(chunks, llm, 1, cache=recorder.wrap(JsonCache(":memory:")))
        cache = recorder.wrap(SampleCache(":memory:"))
        for _ in range(2):
            await draw_samples(once, n=2, max_concurrency=2, retries=0, timeout=None, cache=cache, key="k")

    asyncio.run(run_all())
    assert len(recorder.threads) >= 6 and loop_threads
    assert not set(recorder.threads) & set(loop_threads)  # every get/put ran in a worker thread


def test_one_store_behind_all_three_caches(tmp_path):
    """Samples, judge/question decisions and embeddings share SqliteStore (WAL, retries, batch reads)."""
    import numpy as np

    from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
    from conformal_rag_plugins.local.encoder import EmbeddingStore
    from conformal_rag_plugins.runtime.kv_cache import JsonCache, SqliteStore

    for cls in (SampleCache, JsonCache, EmbeddingStore):
        assert issubclass(cls, SqliteStore)
    store = EmbeddingStore(tmp_path / "emb.sqlite")
    vecs = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert store.put_many([(f"k{i}", v.tobytes()) for i, v in enumerate(vecs)])
    found = store.get_many(["k0", "k2", "missing"] * 300)  # more keys than one SQLite query takes
    assert sorted(found) == ["k0", "k2"]
    assert np.array_equal(np.frombuffer(found["k2"], dtype=np.float32), vecs[2])
    assert len(store) == 3
    store.close()


class _FakeModel:
    """Stands in for the SentenceTransformer: unit vectors from the text length; counts the texts it encodes."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.encoded: list[str] = []

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        import numpy as np

        self.encoded.extend(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i, len(text) % self.dimension] = 1.0
        return out


@pytest.mark.parametrize(
    "bad",
    [b"\x00\x00\x80?", b"\x00" * 8, b"", "not bytes", b"\x00" * (384 * 8), b"\x00\x00\xc0\x7f" * 384],
    ids=["4 bytes", "8 bytes", "empty", "text", "float64 row", "nan row"],
)
def test_a_corrupted_embedding_row_is_recomputed_and_rewritten(tmp_path, bad) -> None:
    """A bad cached vector is a cache miss: never broadcast to a constant vector, never a traceback."""
    import numpy as np

    from conformal_rag_plugins.local.encoder import EmbeddingStore, MiniLMEncoder

    enc = MiniLMEncoder.__new__(MiniLMEncoder)  # no model load: the fake below encodes
    enc._model = _FakeModel(enc.dimension)
    enc.batch_size = 8
    enc._db = EmbeddingStore(tmp_path / "emb.sqlite")
    texts = ["hello", "hi"]
    expected = enc.encode(texts)
    assert enc._model.encoded == texts
    enc._db.put_many([(enc._key("hello"), bad)])  # corrupt one row in place
    enc._model.encoded.clear()
    got = enc.encode(texts)
    assert np.array_equal(got, expected)
    assert enc._model.encoded == ["hello"]  # only the bad row is recomputed
    row = enc._db.get_many([enc._key("hello")])[enc._key("hello")]
    assert isinstance(row, bytes) and np.array_equal(np.frombuffer(row, dtype=np.float32), expected[0])
    enc._model.encoded.clear()
    assert np.array_equal(enc.encode(texts), expected) and enc._model.encoded == []  # rewritten: a hit again
    enc._db.close()
