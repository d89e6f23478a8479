"""Issue 41 item 6: a full disk under ``--persist-dir`` and a read-only cache folder are one line and exit 2.

Chroma reports both as its own ``InternalError`` (the messages below were measured with chromadb 1.5.9
on a 200 KB and a 400 KB tmpfs, and on a read-only one), which ``conformal-rag`` printed as a
traceback with exit code 1. Here Chroma's writes are simulated raising those errors; no index is built.
"""

from __future__ import annotations

import errno
import sqlite3

import pytest
from chromadb.errors import InternalError

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import calibrate_cmd
from conformal_rag_plugins.local import chroma

from ..norman_files import ENTRIES, write_corpus, write_jsonl

FULL = "Query error: Database error: error returned from database: (code: 13) database or disk is full"
READ_ONLY = "Read-only file system (os error 30)"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InternalError(FULL), errno.ENOSPC),
        (InternalError(READ_ONLY), errno.EROFS),
        (sqlite3.OperationalError("attempt to write a readonly database"), errno.EROFS),
    ],
)
def test_a_disk_fault_reported_by_the_store_is_an_os_error_naming_the_folder(error, code) -> None:
    found = chroma.disk_error(error, "/data/chroma")
    assert isinstance(found, OSError) and found.errno == code and found.filename == "/data/chroma"
    assert "Chroma cannot write its index there" in found.strerror and "--persist-dir" in found.strerror


def test_other_errors_are_left_alone() -> None:
    assert chroma.disk_error(InternalError("collection xyz does not exist")) is None
    assert chroma.disk_error(RuntimeError("disk is full")) is None  # not the store's
    assert chroma.disk_error(OSError(errno.ENOSPC, "No space left on device")) is None  # already one


def test_a_read_only_folder_is_refused_when_the_client_opens(monkeypatch, tmp_path) -> None:
    import chromadb

    def read_only(*args, **kwargs):
        raise InternalError(READ_ONLY)

    monkeypatch.setattr(chromadb, "PersistentClient", read_only)
    open_client = getattr(chroma.chroma_client, "__wrapped__", chroma.chroma_client)  # the fast tier's guard
    with pytest.raises(OSError, match="Read-only file system: Chroma cannot write its index there") as info:
        open_client(tmp_path / "chroma")
    assert info.value.filename == str(tmp_path / "chroma") and info.value.errno == errno.EROFS


@pytest.mark.parametrize(("message", "reason"), [(FULL, "No space left on device"), (READ_ONLY, "Read-only")])
def test_the_command_line_says_one_line_and_exits_2(monkeypatch, tmp_path, capsys, message, reason) -> None:
    def indexing(*args, **kwargs):
        raise InternalError(message)  # what Chroma raises when a write hits the disk

    monkeypatch.setattr(calibrate_cmd, "run_calibrate", indexing)
    corpus = write_corpus(tmp_path / "corpus.jsonl", ENTRIES[:2])
    questions = write_jsonl(tmp_path / "q.jsonl", [{"question": "Who?", "gold_ids": ["rollo"]}])
    argv = ["calibrate", "--corpus", corpus, "--questions", questions, "--out", tmp_path / "cal.json"]
    code = main([str(a) for a in [*argv, "--persist-dir", tmp_path / "chroma"]])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()]
    assert err.startswith(f"conformal-rag: error: {tmp_path / 'chroma'}: {reason}")


def test_an_unrelated_error_still_raises(monkeypatch, tmp_path) -> None:
    def bug(*args, **kwargs):
        raise InternalError("collection xyz does not exist")

    monkeypatch.setattr(calibrate_cmd, "run_calibrate", bug)
    corpus = write_corpus(tmp_path / "corpus.jsonl", ENTRIES[:2])
    questions = write_jsonl(tmp_path / "q.jsonl", [{"question": "Who?", "gold_ids": ["rollo"]}])
    argv = ["calibrate", "--corpus", corpus, "--questions", questions, "--out", tmp_path / "c.json"]
    with pytest.raises(InternalError, match="does not exist"):
        main([str(a) for a in argv])
