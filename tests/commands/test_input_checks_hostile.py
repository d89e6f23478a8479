"""Hostile command lines (issue 33, item 6): one error line and exit 2, before any work, never a traceback.

Numbers Python's JSON parser reads but nothing should (``1e999``, a 5,000-digit integer, nesting
100,000 deep) in an input line; chunking and pool options out of range; an ``--out`` that is a
device or a FIFO, which an atomic write would replace by a regular file. Issue 41 item 6: a lone
surrogate escape in an input line, a calibration file asking for 10**30 candidates, ``--trials 10**30``
and an output path in a symbolic link loop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import calibration_inputs

from ..norman_files import ENTRIES, write_corpus, write_jsonl


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl", ENTRIES[:2])


@pytest.fixture
def qa(tmp_path) -> Path:
    rows = [{"id": "q1", "question": "Who founded Normandy?", "answers": ["Rollo"], "context_id": "rollo"}]
    return write_jsonl(tmp_path / "qa.jsonl", rows)


@pytest.fixture
def questions(tmp_path) -> Path:
    rows = [{"id": "q1", "question": "Who founded Normandy?", "answers": ["Rollo"], "gold_ids": ["rollo"]}]
    return write_jsonl(tmp_path / "labelled.jsonl", rows)


@pytest.fixture(autouse=True)
def no_heavy_work(monkeypatch, tmp_path):
    """Tripwires: no LLM, no index, no chunking. Every error here must come before them."""
    from conformal_rag_plugins.commands import demo, hosts, unit_candidates
    from conformal_rag_plugins.commands import evaluate_answer_sets as evaluate_answers
    from conformal_rag_plugins.commands import evaluate_retrieval as evaluate

    def tripwire(*args, **kwargs):
        raise AssertionError("the command started its work before refusing the input")

    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration_inputs, "build_llm", tripwire)
    for name in ("build_hosts", "build_host", "build_fanout"):
        monkeypatch.setattr(hosts, name, tripwire)
    monkeypatch.setattr(unit_candidates, "build_fanout", tripwire)
    monkeypatch.setattr(evaluate, "collect_candidates", tripwire)
    monkeypatch.setattr(evaluate_answers, "build_host", tripwire)
    monkeypatch.setattr(demo, "bundled_corpus", tripwire)
    monkeypatch.setattr(calibration_inputs, "get_framework", tripwire)  # chunking


def _fails(argv: list, capsys, *expected: str) -> str:
    """Run the CLI in-process; assert exit 2 and one ``conformal-rag: error:`` line holding ``expected``."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, (captured.out, captured.err)
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("conformal-rag: error: "), lines[0]
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def _commands(corpus: Path, qa: Path, questions: Path, out: Path) -> dict[str, list]:
    return {
        "evaluate": ["evaluate", "--corpus", corpus, "--qa", qa, "--alpha", "0.1", "--json", out],
        "calibrate": ["calibrate", "--corpus", corpus, "--questions", questions, "--out", out],
        "generate-calibration": ["generate-calibration", "--corpus", corpus, "--n", "1", "--out", out],
        "label": ["label", "--corpus", corpus, "--questions", questions, "--out", out],
    }


# --- chunking and pool options ------------------------------------------------------------------------


CHUNKING = {
    "size 0": (["--chunk-size", "0"], "--chunk-size must be an integer >= 1"),
    "size -3": (["--chunk-size", "-3"], "--chunk-size must be an integer >= 1"),
    "overlap = size": (["--chunk-size", "50", "--chunk-overlap", "50"], "smaller than --chunk-size (50)"),
    "overlap > size": (["--chunk-size", "50", "--chunk-overlap", "80"], "smaller than --chunk-size (50)"),
    "overlap > default size": (["--chunk-overlap", "300"], "smaller than --chunk-size (the default 254)"),
    "negative overlap": (["--chunk-overlap", "-1"], "--chunk-overlap must be an integer >= 0"),
}


@pytest.mark.parametrize("case", sorted(CHUNKING))
@pytest.mark.parametrize("command", ["evaluate", "calibrate", "generate-calibration", "label"])
def test_chunk_options_out_of_range_are_refused(tmp_path, corpus, qa, questions, capsys, command, case) -> None:
    extra, message = CHUNKING[case]
    _fails([*_commands(corpus, qa, questions, tmp_path / "o.json")[command], *extra], capsys, message)


@pytest.mark.parametrize("command", ["evaluate", "calibrate", "label", "demo"])
def test_a_huge_pool_size_is_refused_before_indexing(tmp_path, corpus, qa, questions, capsys, command) -> None:
    argv = {
        **_commands(corpus, qa, questions, tmp_path / "o.json"),
        "demo": ["demo", "--out", tmp_path / "demo", "--persist-dir", tmp_path / "chroma", "--no-answers"],
    }[command]
    line = _fails([*argv, "--pool-size", str(10**30)], capsys, "pool_size", "between 1 and 100000")
    assert len(line) < 200  # the number is shortened, not printed whole


@pytest.mark.parametrize("command", ["evaluate", "calibrate"])
def test_a_huge_pool_sizes_entry_is_refused(tmp_path, corpus, qa, questions, capsys, command) -> None:
    argv = _commands(corpus, qa, questions, tmp_path / "o.json")[command]
    _fails([*argv, "--pool-sizes", f"50,{10**30}"], capsys, "pool", "between 1 and 100000")


# --- numbers and nesting Python's parser reads, in an input line -----------------------------------------


BAD_LINES = {
    "1e999": ('{"id": "q1", "question": "A?", "answers": ["x"], "context_id": "rollo", "w": 1e999}', "1e999"),
    "-1e999": ('{"id": "q1", "question": "A?", "answers": ["x"], "context_id": "rollo", "w": -1e999}', "1e999"),
    "5000 digits": ('{"id": "q1", "question": "A?", "context_id": "rollo", "n": ' + "7" * 5000 + "}", "5000 digits"),
    "100000 deep": ('{"id": "q1", "question": "A?", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
@pytest.mark.parametrize("command", ["evaluate", "calibrate", "label"])
def test_unreadable_numbers_and_nesting_in_a_question_line(tmp_path, corpus, capsys, command, case) -> None:
    text, message = BAD_LINES[case]
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": "q0", "question": "B?", "answers": ["y"], "context_id": "rollo"}\n' + text + "\n")
    argv = _commands(corpus, path, path, tmp_path / "o.json")[command]
    line = _fails(argv, capsys, f"{path}:2:", message)
    assert len(line) < 300


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_unreadable_numbers_and_nesting_in_a_corpus_line(tmp_path, qa, capsys, case) -> None:
    text, message = BAD_LINES[case]
    path = tmp_path / "corpus.jsonl"
    path.write_text(text.replace('"question"', '"text"') + "\n", encoding="utf-8")
    _fails(["evaluate", "--corpus", path, "--qa", qa, "--alpha", "0.1"], capsys, f"{path}:1:", message)


# --- outputs that are not regular files --------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("command", ["evaluate", "calibrate", "generate-calibration", "label"])
def test_an_output_fifo_is_refused_and_kept(tmp_path, corpus, qa, questions, capsys, command) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    _fails(_commands(corpus, qa, questions, fifo)[command], capsys, str(fifo), "not a regular file")
    assert fifo.is_fifo()


@pytest.mark.skipif(not Path("/dev/null").is_char_device(), reason="needs /dev/null")
@pytest.mark.parametrize("command", ["evaluate", "calibrate", "generate-calibration", "label"])
def test_an_output_device_is_refused(tmp_path, corpus, qa, questions, capsys, command) -> None:
    _fails(_commands(corpus, qa, questions, Path("/dev/null"))[command], capsys, "/dev/null", "not a regular file")
    assert Path("/dev/null").is_char_device()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_monitor_output_fifo_is_refused(tmp_path, corpus, qa, capsys) -> None:
    fifo = tmp_path / "monitor.fifo"
    os.mkfifo(fifo)
    stream = write_jsonl(tmp_path / "stream.jsonl", [{"question": "Who?"}])
    argv = ["monitor", "--corpus", corpus, "--qa", qa, "--stream", stream, "--alpha", "0.1", "--out", fifo]
    _fails(argv, capsys, str(fifo), "not a regular file")
    assert fifo.is_fifo()


# --- report: a calibration that cannot say which questions it was calibrated on ------------------------------------


def _dense_calibration(question_ids: tuple[str, ...]):
    from conformal_rag_plugins import Fingerprint, RetrievalCalibration

    fp = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance", "dense")
    scores = tuple(i / 20 for i in range(1, 21))  # flagged_rank(20, 0.1): rank 20, the largest
    return RetrievalCalibration(1.0, 0.1, "split", "relative", 5, 20, 0, scores, fp, question_ids_=question_ids)


@pytest.mark.parametrize("how", ["bare pools", "question_ids edited to []"])
def test_report_refuses_a_calibration_without_its_questions(tmp_path, corpus, qa, capsys, how) -> None:
    from conformal_rag_plugins.storage.jsonio import with_checksum

    path = tmp_path / "cal.json"
    if how == "bare pools":
        _dense_calibration(()).save(path)
    else:
        data = _dense_calibration(tuple(f"{i:016x}" for i in range(20))).to_dict()
        body = {k: v for k, v in data.items() if k != "checksum"} | {"question_ids": []}
        path.write_text(json.dumps(with_checksum(body)), encoding="utf-8")
    argv = ["report", "--calibration", path, "--corpus", corpus, "--qa", qa, "--out", tmp_path / "r", "--quiet"]
    _fails(argv, capsys, str(path), "does not record which questions it was calibrated on")
    assert not (tmp_path / "r" / "index.html").exists()


# --- issue 41 item 6: lone surrogates, a huge pool in a file, endless trials, a symbolic link loop -----------------


SURROGATE_CASES = {
    "corpus id": ("corpus", {"id": "rollo\ud800", "text": "Rollo founded Normandy."}),
    "corpus title": ("corpus", {"id": "rollo", "title": "\udfffRollo", "text": "Rollo founded Normandy."}),
    "corpus text": ("corpus", {"id": "rollo", "text": "Rollo founded \ud800 Normandy."}),
    "question": ("qa", {"id": "q1", "question": "Who\udc80?", "answers": ["Rollo"], "context_id": "rollo"}),
}


@pytest.mark.parametrize("case", sorted(SURROGATE_CASES))
def test_a_lone_surrogate_in_an_input_line_is_refused(tmp_path, corpus, qa, capsys, case) -> None:
    which, row = SURROGATE_CASES[case]
    bad = write_jsonl(tmp_path / f"bad_{which}.jsonl", [row])  # json.dumps writes it as a \ud800 escape
    assert "\\ud" in bad.read_text(encoding="utf-8")  # a valid UTF-8 file: the escape is what breaks
    files = {"corpus": corpus, "qa": qa, which: bad}
    argv = ["evaluate", "--corpus", files["corpus"], "--qa", files["qa"], "--alpha", "0.1"]
    _fails(argv, capsys, f"{bad}:1", "lone UTF-16 surrogate")


def test_a_lone_surrogate_in_a_monitor_stream_is_refused(tmp_path, corpus, qa, capsys) -> None:
    stream = write_jsonl(tmp_path / "stream.jsonl", [{"question": "Who?"}, {"question": "Who \ud800 now?"}])
    argv = ["monitor", "--corpus", corpus, "--qa", qa, "--stream", stream, "--alpha", "0.1"]
    _fails([*argv, "--out", tmp_path / "m.json"], capsys, f"{stream}:2", "lone UTF-16 surrogate")


def _saved_with_pool(tmp_path: Path, pool_size: int) -> Path:
    from conformal_rag_plugins.storage.jsonio import with_checksum

    data = _dense_calibration(tuple(f"{i:016x}" for i in range(20))).to_dict()
    body = {k: v for k, v in data.items() if k != "checksum"} | {"pool_size": pool_size}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(with_checksum(body)), encoding="utf-8")
    return path


def test_a_huge_pool_size_in_a_calibration_file_is_refused_by_report_and_monitor(tmp_path, corpus, qa, capsys) -> None:
    """Before the fix the file loaded and ``report``/``monitor`` asked the store for 10**30 candidates."""
    path = _saved_with_pool(tmp_path, 10**30)
    argv = ["report", "--calibration", path, "--corpus", corpus, "--qa", qa, "--out", tmp_path / "r", "--quiet"]
    line = _fails(argv, capsys, "the calibration's pool_size", "between 1 and 100000", "(31 digits)")
    assert len(line) < 200
    stream = write_jsonl(tmp_path / "stream.jsonl", [{"question": "Who?"}])
    argv = ["monitor", "--calibration", path, "--corpus", corpus, "--qa", qa, "--stream", stream]
    _fails([*argv, "--out", tmp_path / "m.json"], capsys, "the calibration's pool_size", "between 1 and 100000")


@pytest.mark.parametrize("answers", [False, True])
def test_endless_trials_are_refused_before_any_work(tmp_path, corpus, qa, capsys, answers) -> None:
    argv = ["evaluate", "--corpus", corpus, "--qa", qa, "--alpha", "0.1", "--trials", str(10**30)]
    line = _fails([*argv, *(["--answers"] if answers else [])], capsys, "trials", "between 1 and 100000")
    assert len(line) < 200


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
@pytest.mark.parametrize("command", ["evaluate", "calibrate", "label", "report"])
def test_an_output_in_a_symbolic_link_loop_is_refused(tmp_path, corpus, qa, questions, capsys, command) -> None:
    loop = tmp_path / "loop"
    os.symlink(loop, loop)  # a link to itself
    argv = {
        **_commands(corpus, qa, questions, loop),
        "report": ["report", "--calibration", _saved_with_pool(tmp_path, 5), "--corpus", corpus, "--qa", qa,
                   "--out", loop / "r", "--quiet"],
    }[command]  # fmt: skip
    _fails(argv, capsys, str(loop), "symbolic link loop")
    assert loop.is_symlink()
