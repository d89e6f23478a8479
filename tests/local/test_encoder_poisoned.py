"""Issue 41 section 6, poisoned caches: the embedding cache serves only unit vectors, and a locked file is
reported at once.

A row of zeros (SQLite's ``zeroblob``) or a vector scaled by 1000 has the right length and finite
values, so it was served: every similarity computed from it changed (an ``evaluate`` then reported
coverage 1.000 with sets of 9 where the true figures are 0.815 and 4.93). Such a row is now a miss,
recomputed and rewritten, with a warning. A ``embeddings.sqlite`` locked by another process gave a
traceback after 196 s; it is now an ``OSError`` naming the file within seconds, one line on the CLI.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.local import encoder as encoder_module
from conformal_rag_plugins.local.encoder import EmbeddingStore, MiniLMEncoder

LOGGER = "conformal_rag_plugins"
DIM = MiniLMEncoder.dimension


class FakeModel:
    """Stands in for the SentenceTransformer (no model load): a unit vector per text, counting the texts."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        self.encoded.extend(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i, len(text) % DIM] = 1.0
        return out


def _encoder(path: Path) -> MiniLMEncoder:
    enc = MiniLMEncoder.__new__(MiniLMEncoder)
    enc._model = FakeModel()
    enc.batch_size = 8
    enc._db = EmbeddingStore(path)
    return enc


def _true(text: str) -> np.ndarray:
    return FakeModel().encode([text])[0]


POISONED = {
    "zeros (zeroblob)": lambda v: np.zeros(DIM, dtype=np.float32),
    "scaled x1000": lambda v: (v * 1000).astype(np.float32),
    "scaled x0.5": lambda v: (v * 0.5).astype(np.float32),
    "another direction, not unit": lambda v: np.full(DIM, 1.0, dtype=np.float32),
}


@pytest.mark.parametrize("poison", list(POISONED.values()), ids=list(POISONED))
def test_a_poisoned_embedding_row_is_a_miss_recomputed_and_rewritten(tmp_path, caplog, poison) -> None:
    enc = _encoder(tmp_path / "embeddings.sqlite")
    text = "Rollo led the Normans."
    key = enc._key(text)
    enc._db.put_many([(key, poison(_true(text)).tobytes())])  # written by someone else, or corrupted
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = enc.encode([text])
    assert np.array_equal(got[0], _true(text)) and enc._model.encoded == [text]  # recomputed, not served
    assert "not 384 finite values of unit length" in caplog.text
    assert np.array_equal(np.frombuffer(enc._db.get_many([key])[key], dtype=np.float32), _true(text))  # rewritten
    enc._model.encoded.clear()
    assert np.array_equal(enc.encode([text])[0], _true(text)) and enc._model.encoded == []  # now a hit


def test_a_good_row_is_served_without_a_warning(tmp_path, caplog) -> None:
    enc = _encoder(tmp_path / "embeddings.sqlite")
    text = "Rollo led the Normans."
    stored = np.full(DIM, 1.0 / np.sqrt(DIM), dtype=np.float32)  # a unit vector the fake would not compute
    enc._db.put_many([(enc._key(text), stored.tobytes())])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = enc.encode([text])
    assert np.array_equal(got[0], stored) and enc._model.encoded == [] and "unit length" not in caplog.text


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """An ``embeddings.sqlite`` another connection holds an exclusive lock on."""
    path = tmp_path / "embeddings.sqlite"
    sqlite3.connect(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield path
    finally:
        holder.execute("COMMIT")
        holder.close()


def test_a_locked_embedding_cache_is_a_clear_error_within_seconds(locked) -> None:
    """What ``MiniLMEncoder`` opens before it loads the model (the real encoder: the CLI test below)."""
    from conformal_rag_plugins.local.encoder import open_embedding_store

    start = time.monotonic()
    with pytest.raises(OSError, match="locked by another process") as info:
        open_embedding_store(locked)
    elapsed = time.monotonic() - start
    assert info.value.filename == str(locked)
    assert elapsed < 15, elapsed  # the default timeouts, not 196 s
    assert not [p for p in locked.parent.iterdir() if ".unreadable-" in p.name]  # never moved aside


@pytest.mark.integration  # the CLI builds the real encoder and a Chroma client
def test_the_cli_says_one_line_and_exits_2_on_a_locked_embedding_cache(locked, monkeypatch, capsys) -> None:
    from conformal_rag_plugins.cli import main

    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(locked.parent))
    monkeypatch.setattr(encoder_module, "_SHARED", {})  # no encoder of an earlier test is reused
    monkeypatch.setattr(encoder_module, "EMBEDDING_BUSY_TIMEOUT", 0.1)
    corpus, qa = locked.parent / "corpus.jsonl", locked.parent / "qa.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": f"Note {i}: the code is {7 * i}."}) + "\n" for i in range(20))
    )
    qa.write_text(
        "".join(
            json.dumps(
                {"id": f"q{i}", "question": f"What is code {i}?", "answers": [str(7 * i)], "gold_ids": [f"d{i}"]}
            )
            + "\n"
            for i in range(20)
        )
    )
    argv = ["evaluate", "--corpus", str(corpus), "--qa", str(qa), "--alpha", "0.2", "--retriever", "dense"]
    code = main([*argv, "--trials", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith(f"conformal-rag: error: {locked}: the embedding cache is locked"), err
    assert not [line for line in err if "Traceback" in line]
