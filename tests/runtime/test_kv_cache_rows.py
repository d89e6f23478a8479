"""Issue 33 item 6: cache rows and cache files are checked before they are trusted.

A row is served only when it holds what its key promises (M samples, a ``{"text"}`` record, a
vector of the model's dimension); any other row is a miss, recomputed and rewritten. A file that
is not a readable SQLite database is moved aside for a fresh one, and a cache folder that cannot
be written gives an in-memory cache for the run: each with a logged warning, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.concurrent_draws import draw_samples
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.labelling.llm import LLMTask
from conformal_rag_plugins.labelling.llm_judge import LLMJudge
from conformal_rag_plugins.labelling.options import QuestionOptions
from conformal_rag_plugins.labelling.prompts import QUESTION_FEW_SHOT_TEMPLATE
from conformal_rag_plugins.labelling.question_gen import agenerate_questions
from conformal_rag_plugins.local.encoder import EmbeddingStore, MiniLMEncoder
from conformal_rag_plugins.runtime.kv_cache import JsonCache, SqliteStore, is_corrupt_error

LOGGER = "conformal_rag_plugins"
M = 4

# --- rows ----------------------------------------------------------------------------------------------------------


class CountingLLM:
    """An answer sampler's ``call_once``: the true answer, counting calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> Sample:
        self.calls += 1
        return Sample("Rollo")


def _draw(cache: SampleCache, llm: CountingLLM) -> list[Sample]:
    return asyncio.run(draw_samples(llm, n=M, max_concurrency=2, retries=0, timeout=None, cache=cache, key="k"))


BAD_SAMPLE_ROWS = {
    "empty list (served as I don't know)": "[]",
    "1 sample where M=4 (an injected answer)": '[{"text": "INJECTED: send your password"}]',
    "M+1 samples": "[" + ",".join(['{"text": "INJECTED"}'] * (M + 1)) + "]",
    "wrong shape (KeyError)": '[{"txt": "a"}, {"txt": "b"}, {"txt": "c"}, {"txt": "d"}]',
    "not a list": '{"text": "INJECTED"}',
    "list of numbers": "[1, 2, 3, 4]",
    "bad token count": '[{"text": "a", "prompt_tokens": "many"}]',
    "not JSON (JSONDecodeError)": "INJECTED not json",
    "every sample failed": "[" + ",".join(['{"text": "", "failed": true}'] * M) + "]",
}


@pytest.mark.parametrize("row", list(BAD_SAMPLE_ROWS.values()), ids=list(BAD_SAMPLE_ROWS))
def test_a_sample_row_that_breaks_its_keys_promise_is_a_miss_and_is_rewritten(tmp_path, caplog, row) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put_text("k", row)  # written by an older version, a crash, or someone else
    llm = CountingLLM()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = _draw(cache, llm)
    assert [s.text for s in got] == ["Rollo"] * M and llm.calls == M  # drawn afresh, nothing injected
    assert "treated as a miss" in caplog.text
    assert [s.text for s in cache.get("k", M)] == ["Rollo"] * M  # rewritten
    llm.calls = 0
    assert [s.text for s in _draw(cache, llm)] == ["Rollo"] * M and llm.calls == 0  # now a hit
    cache.close()


def test_a_good_sample_row_is_still_served(tmp_path) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put("k", [Sample("Rollo"), Sample("", failed=True), Sample("Rollo"), Sample("Hrolf", logprob=-0.5)])
    llm = CountingLLM()
    assert [s.text for s in _draw(cache, llm)] == ["Rollo", "", "Rollo", "Hrolf"] and llm.calls == 0


BAD_TEXT_ROWS = {
    "wrong shape": '{"txt": "yes"}',
    "not a dict": '["yes"]',
    "not JSON": "yes",
    "text not str": '{"text": 1}',
}


@pytest.mark.parametrize("row", list(BAD_TEXT_ROWS.values()), ids=list(BAD_TEXT_ROWS))
def test_a_bad_judge_row_is_a_miss_and_is_rewritten(row) -> None:
    calls: list[str] = []

    async def llm(prompt: str) -> str:
        calls.append(prompt)
        return "yes"

    cache = JsonCache(":memory:")
    judge = LLMJudge(llm, model="fake", cache=cache)
    assert asyncio.run(judge("Who?", "Rollo", "Rollo led them.")) is True
    (key,) = cache.keys()
    cache.put_text(key, row)
    calls.clear()
    assert asyncio.run(judge("Who?", "Rollo", "Rollo led them.")) is True and len(calls) == 1
    assert cache.get(key) == {"text": "yes"}


@pytest.mark.parametrize("row", list(BAD_TEXT_ROWS.values()), ids=list(BAD_TEXT_ROWS))
def test_a_bad_question_row_is_a_miss_and_is_rewritten(row) -> None:
    good = '{"question": "Who led the Normans?", "answer": "Rollo"}'
    calls: list[str] = []

    async def llm(prompt: str) -> str:
        calls.append(prompt)
        return good

    chunks = [CorpusEntry("n", "The Normans were led by Rollo, a Viking chief of great renown.")]
    cache = JsonCache(":memory:")
    task = LLMTask.plain(llm, QUESTION_FEW_SHOT_TEMPLATE, model="fake")
    options = QuestionOptions(call_retries=0, max_retries=0)
    asyncio.run(agenerate_questions(chunks, task, 1, cache=cache, options=options))
    (key,) = cache.keys()
    cache.put_text(key, row)
    calls.clear()
    examples, report = asyncio.run(agenerate_questions(chunks, task, 1, cache=cache, options=options))
    assert [e.question for e in examples] == ["Who led the Normans?"] and len(calls) == 1 and report.cache_hits == 0
    assert cache.get(key) == {"text": good}


# --- files ---------------------------------------------------------------------------------------------------------


def _random_bytes(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(8192))


def _truncated(path: Path) -> None:
    store = EmbeddingStore(path)
    store.put_many([(f"k{i}", np.full(384, i, dtype=np.float32).tobytes()) for i in range(500)])
    store.close()  # the last connection checkpoints the WAL into the file
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 3)


def _header_only(path: Path) -> None:
    _truncated(path)
    with open(path, "r+b") as f:
        f.truncate(50)


UNREADABLE = {"random bytes": _random_bytes, "truncated": _truncated, "cut inside the header": _header_only}


@pytest.mark.parametrize("store_class", [EmbeddingStore, SampleCache, JsonCache])
@pytest.mark.parametrize("spoil", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_an_unreadable_file_is_moved_aside_for_a_fresh_one(tmp_path, caplog, store_class, spoil) -> None:
    path = tmp_path / "cache.sqlite"
    spoil(path)
    spoiled = path.read_bytes()
    with pytest.raises(sqlite3.DatabaseError):  # what every cache raised before
        sqlite3.connect(path).execute("PRAGMA journal_mode=WAL").fetchone()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        store = store_class(path)
    assert "not a readable SQLite database" in caplog.text and "fresh cache" in caplog.text
    (aside,) = [p for p in tmp_path.iterdir() if ".unreadable-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert aside.read_bytes() == spoiled  # kept for the user, not deleted
    assert store.path == str(path) and store.put_text("k", "[]") and store.get_text("k") == "[]"  # a fresh file
    store.close()
    assert store_class(path).get_text("k") == "[]"  # and it persists


@pytest.mark.parametrize("spoil", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_the_encoder_runs_on_an_unreadable_embeddings_file(tmp_path, caplog, spoil) -> None:
    path = tmp_path / "embeddings.sqlite"
    spoil(path)
    enc = _encoder(EmbeddingStore(path))
    got = enc.encode(["hello", "hi"])
    assert got.shape == (2, 384) and enc._model.encoded == ["hello", "hi"]
    enc._model.encoded.clear()
    assert np.array_equal(enc.encode(["hello", "hi"]), got) and enc._model.encoded == []  # cached in the fresh file


def test_a_file_found_corrupt_after_opening_is_replaced(tmp_path, caplog) -> None:
    """A read that finds the open file malformed is a miss, and the store continues on a fresh file."""
    path = tmp_path / "samples.sqlite"
    store = SampleCache(path)
    store.put("k", [Sample("Rollo")])
    store._db.close()
    store._db = _MalformedConnection()  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert store.get("k") is None
    assert "moved to" in caplog.text
    assert store.put("k", [Sample("Hrolf")]) and [s.text for s in store.get("k")] == ["Hrolf"]
    assert len([p for p in tmp_path.iterdir() if ".unreadable-" in p.name]) >= 1


class _MalformedConnection:
    """A connection whose every statement reports a malformed database image."""

    def execute(self, *args: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    def close(self) -> None:
        pass


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder no file can be created in (``/proc/self`` when running as root, which ignores permissions)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        if not Path("/proc/self").is_dir():
            pytest.skip("running as root without /proc: no read-only folder to test with")
        yield Path("/proc/self")
        return
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("store_class", [EmbeddingStore, SampleCache, JsonCache])
@pytest.mark.parametrize("where", ["in the folder", "in a subfolder to create"])
def test_a_read_only_cache_folder_gives_an_in_memory_cache(readonly_dir, caplog, store_class, where) -> None:
    path = readonly_dir / ("cache.sqlite" if where == "in the folder" else "sub/cache.sqlite")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        store = store_class(path)
    assert "cannot be opened" in caplog.text and "in-memory" in caplog.text
    assert store.path == ":memory:" and store.put_text("k", "[]") and store.get_text("k") == "[]"
    assert not path.exists()


def test_sample_drawing_runs_with_a_read_only_cache_folder(readonly_dir) -> None:
    llm = CountingLLM()
    cache = SampleCache(readonly_dir / "samples.sqlite")
    assert [s.text for s in _draw(cache, llm)] == ["Rollo"] * M and llm.calls == M


def test_a_lock_held_at_opening_is_still_raised(tmp_path) -> None:
    """Busy is not corrupt: the file is never moved aside because another process holds it."""
    path = tmp_path / "llm.sqlite"
    sqlite3.connect(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            JsonCache(path, busy_timeout=0.05, retries=1, backoff=0.01)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert [p.name for p in tmp_path.iterdir()] == ["llm.sqlite"]


def test_is_corrupt_error() -> None:
    assert is_corrupt_error(sqlite3.DatabaseError("file is not a database"))
    assert is_corrupt_error(sqlite3.DatabaseError("database disk image is malformed"))
    assert not is_corrupt_error(sqlite3.OperationalError("database is locked"))
    assert not is_corrupt_error(sqlite3.OperationalError("unable to open database file"))
    assert not is_corrupt_error(ValueError("file is not a database"))
    assert issubclass(EmbeddingStore, SqliteStore)


class _FakeModel:
    """Stands in for the SentenceTransformer (no model load): unit vectors from the text length."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.encoded: list[str] = []

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        self.encoded.extend(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i, len(text) % self.dimension] = 1.0
        return out


def _encoder(store: EmbeddingStore) -> MiniLMEncoder:
    enc = MiniLMEncoder.__new__(MiniLMEncoder)
    enc._model = _FakeModel(enc.dimension)
    enc.batch_size = 8
    enc._db = store
    return enc
