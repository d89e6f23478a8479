"""Bad inputs to ``conformal-rag``, as a new user makes them: one error line, exit code 2, no traceback.

Every case fails before any model is loaded or anything is indexed, so the file runs in
seconds. The work functions are replaced by tripwires where a test checks that.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/commands/label.py
#   conformal_rag_plugins/datasets/gold_ids.py
#   conformal_rag_plugins/datasets/jsonl_input.py
#   conformal_rag_plugins/datasets/text_folder.py
#   conformal_rag_plugins/llamaindex/tuned_host.py

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.commands import calibration_inputs
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, InputFileError
from conformal_rag_plugins.runtime.atomic import atomic_path, atomic_write_text, check_output_dir, check_output_file

from ..norman_files import QUESTIONS, write_corpus, write_jsonl


def _qa_rows(context_ids: list[str] | None = None) -> list[dict]:
    ids = context_ids or [c for *_, c in QUESTIONS]
    return [
        {"id": qid, "question": q, "answers": [a], "context_id": cid, "is_impossible": False}
        for (qid, q, a, _), cid in zip(QUESTIONS, ids, strict=True)
    ]


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def qa(tmp_path) -> Path:
    return write_jsonl(tmp_path / "qa.jsonl", _qa_rows())


@pytest.fixture
def questions(tmp_path) -> Path:
    """A labelled questions file as ``label`` writes it (gold ids, not context ids)."""
    rows = [{"id": qid, "question": q, "answers": [a], "gold_ids": [c]} for qid, q, a, c in QUESTIONS]
    return write_jsonl(tmp_path / "labelled.jsonl", rows)


@pytest.fixture(autouse=True)
def no_heavy_work(monkeypatch, tmp_path):
    """Tripwires: no LLM, no index. Every error here must come before them."""
    from conformal_rag_plugins.commands import evaluate_answer_sets as evaluate_answers
    from conformal_rag_plugins.commands import evaluate_retrieval as evaluate
    from conformal_rag_plugins.commands import hosts, unit_candidates

    def tripwire(*args, **kwargs):
        raise AssertionError("the command started its work before refusing the input")

    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration_inputs, "build_llm", tripwire)
    monkeypatch.setattr(hosts, "build_hosts", tripwire)
    monkeypatch.setattr(hosts, "build_host", tripwire)
    monkeypatch.setattr(hosts, "build_fanout", tripwire)
    monkeypatch.setattr(unit_candidates, "build_fanout", tripwire)
    monkeypatch.setattr(evaluate, "collect_candidates", tripwire)
    monkeypatch.setattr(evaluate_answers, "build_host", tripwire)


def _fails(argv: list[str], capsys, *expected: str) -> str:
    """Run the CLI in-process; assert exit 2 and one ``conformal-rag: error:`` line holding ``expected``."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, (captured.out, captured.err)
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    line = lines[0]
    assert line.startswith("conformal-rag: error: "), line
    for text in expected:
        assert text in line, (text, line)
    return line


def _evaluate(corpus, qa, out, *extra) -> list:
    return ["evaluate", "--corpus", corpus, "--qa", qa, "--alpha", "0.1", "--json", out, *extra]


# the sub-commands that read a corpus, with their other arguments
CORPUS_COMMANDS = {
    "evaluate": lambda c, tmp: _evaluate(c, write_jsonl(tmp / "qa.jsonl", _qa_rows()), tmp / "o.json"),
    "evaluate --answers": lambda c, tmp: [
        *_evaluate(c, write_jsonl(tmp / "qa.jsonl", _qa_rows()), tmp / "o.json"),
        "--answers",
    ],
    "calibrate": lambda c, tmp: ["calibrate", "--corpus", c, "--questions", _labelled(tmp), "--out", tmp / "c.json"],
    "generate-calibration": lambda c, tmp: [
        "generate-calibration",
        "--corpus",
        c,
        "--n",
        "1",
        "--out",
        tmp / "g.jsonl",
    ],
    "label": lambda c, tmp: ["label", "--corpus", c, "--questions", _labelled(tmp), "--out", tmp / "l.jsonl"],
}


def _labelled(tmp: Path) -> Path:
    rows = [{"id": qid, "question": q, "answers": [a], "gold_ids": [c]} for qid, q, a, c in QUESTIONS]
    return write_jsonl(tmp / "labelled.jsonl", rows)


# the sub-commands that read a qa/questions file, with the corpus
def _qa_commands(corpus: Path, tmp: Path) -> dict:
    return {
        "evaluate": lambda q: _evaluate(corpus, q, tmp / "o.json", "--no-chunking"),
        "evaluate --answers": lambda q: [*_evaluate(corpus, q, tmp / "o.json"), "--answers"],
        "calibrate": lambda q: ["calibrate", "--corpus", corpus, "--questions", q, "--out", tmp / "c.json"],
        "label": lambda q: ["label", "--corpus", corpus, "--questions", q, "--out", tmp / "l.jsonl"],
    }


# --- 1. qa context ids missing from the corpus --------------------------------------------------------


@pytest.mark.parametrize("chunking", [[], ["--no-chunking"]], ids=["chunked", "unchunked"])
def test_evaluate_refuses_context_ids_missing_from_the_corpus(tmp_path, corpus, capsys, chunking) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", _qa_rows(["normans", "typo-1", "seine", "typo-2"]))
    line = _fails(_evaluate(corpus, qa, tmp_path / "o.json", *chunking), capsys, str(qa), "'typo-1'", "2 gold")
    assert "not in the corpus" in line
    assert not (tmp_path / "o.json").exists()


def test_evaluate_answers_refuses_context_ids_missing_from_the_corpus(tmp_path, corpus, capsys) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", _qa_rows(["normans", "rollo", "nowhere", "hastings"]))
    _fails([*_evaluate(corpus, qa, tmp_path / "o.json"), "--answers"], capsys, str(qa), "'nowhere'")


def test_calibrate_refuses_gold_ids_missing_from_the_corpus_before_indexing(tmp_path, corpus, capsys) -> None:
    rows = [{"question": "Who?", "answers": ["Rollo"], "gold_ids": ["no-such-doc"]}]
    questions = write_jsonl(tmp_path / "labelled.jsonl", rows)
    _fails(["calibrate", "--corpus", corpus, "--questions", questions, "--out", tmp_path / "c.json"], capsys,
           str(questions), "'no-such-doc'")  # fmt: skip


def test_the_same_check_function_guards_evaluate_and_calibrate(monkeypatch, tmp_path, corpus, qa, capsys) -> None:
    """``evaluate`` reuses ``check_gold_ids``, the calibrators' check (no second copy of the logic)."""
    from conformal_rag_plugins.retrieval import pool_calibration as driver

    calls = []

    def spy(examples, known_ids):
        calls.append(len(examples))
        raise CalibrationError("spied")

    monkeypatch.setattr(driver, "check_gold_ids", spy)
    _fails(_evaluate(corpus, qa, tmp_path / "o.json", "--no-chunking"), capsys, "spied")
    assert calls == [4]


# --- 2. duplicate question ids ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "evaluate --answers", "calibrate", "label"])
def test_duplicate_question_ids_are_refused_with_both_lines(tmp_path, corpus, capsys, command) -> None:
    rows = _qa_rows()
    rows[2]["id"] = "q1"
    if command in ("calibrate", "label"):
        rows = [{"id": r["id"], "question": r["question"], "gold_ids": [r["context_id"]]} for r in rows]
    q = write_jsonl(tmp_path / "dup.jsonl", rows)
    _fails(_qa_commands(corpus, tmp_path)[command](q), capsys, f"{q}:3:", "duplicate question id 'q1'", "line 1")


# --- 3. and 4. counts -------------------------------------------------------------------------------


@pytest.mark.parametrize("trials", ["0", "-5"])
@pytest.mark.parametrize("answers", [[], ["--answers"]], ids=["retrieval", "answers"])
def test_trials_below_one_are_refused(tmp_path, corpus, qa, capsys, trials, answers) -> None:
    _fails([*_evaluate(corpus, qa, tmp_path / "o.json"), *answers, "--trials", trials], capsys, "trials", trials)
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("pool", ["0", "-1"])
@pytest.mark.parametrize("command", ["evaluate", "calibrate", "label", "demo"])
def test_pool_size_below_one_is_refused(monkeypatch, tmp_path, corpus, questions, capsys, pool, command) -> None:
    from conformal_rag_plugins.commands import demo

    monkeypatch.setattr(demo, "bundled_corpus", lambda: pytest.fail("demo started its work"))
    argv = {
        "evaluate": _evaluate(corpus, tmp_path / "qa.jsonl", tmp_path / "o.json"),
        "calibrate": ["calibrate", "--corpus", corpus, "--questions", questions, "--out", tmp_path / "c.json"],
        "label": ["label", "--corpus", corpus, "--questions", questions, "--out", tmp_path / "l.jsonl"],
        "demo": ["demo", "--out", tmp_path / "demo", "--persist-dir", tmp_path / "chroma", "--no-answers"],
    }[command]
    _fails([*argv, "--pool-size", pool], capsys, "pool_size", pool)


# --- 5. to 8. corpus files ----------------------------------------------------------------------------


BAD_CORPORA = {
    "empty": (b"", "the corpus file holds no entries", None),
    "blank lines only": (b"\n  \n", "the corpus file holds no entries", None),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not UTF-8 text", 1),
    "latin-1": ('{"id": "a", "text": "ok"}\n{"id": "b", "text": "café"}\n'.encode("latin-1"), "not UTF-8 text", 2),
    "utf-16": ('{"id": "a", "text": "x"}\n'.encode("utf-16"), "not UTF-8 text", 1),
    "invalid json": (b'{"id": "a", "text": "x"}\n{"id": "b", "text": }\n', "invalid JSON", 2),
    "a list": (b'{"id": "a", "text": "x"}\n["b", "text"]\n', "got an array", 2),
    "a number": (b"42\n", "got a number", 1),
    "text null": (b'{"id": "a", "text": "x"}\n{"id": "b", "text": null}\n', "'text' must be a string, got null", 2),
    "text a number": (b'{"id": "a", "text": 3.5}\n', "'text' must be a string, got a number", 1),
    "text a list": (b'{"id": "a", "text": ["x"]}\n', "'text' must be a string, got an array", 1),
    "no text": (b'{"id": "a"}\n', "needs 'id' and 'text'", 1),
    "id null": (b'{"id": null, "text": "x"}\n', "'id' must be a non-empty string", 1),
    "duplicate id": (b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "duplicate corpus id 'a'", 2),
}


@pytest.mark.parametrize("case", sorted(BAD_CORPORA))
@pytest.mark.parametrize("command", sorted(CORPUS_COMMANDS))
def test_bad_corpus_files_name_the_file_and_line(tmp_path, capsys, command, case) -> None:
    data, message, line = BAD_CORPORA[case]
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(data)
    where = f"{path}:{line}:" if line else f"{path}:"
    _fails(CORPUS_COMMANDS[command](path, tmp_path), capsys, where, message)


@pytest.mark.parametrize("command", sorted(CORPUS_COMMANDS))
@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_missing_or_directory_corpus(tmp_path, capsys, command, kind) -> None:
    path = tmp_path / "nope.jsonl"
    if kind == "directory":
        path.mkdir()
    _fails(CORPUS_COMMANDS[command](path, tmp_path), capsys, str(path), "no such" if kind == "missing" else "directory")


def test_non_utf8_file_in_a_docs_folder_is_named(tmp_path, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("fine\n", encoding="utf-8")
    (folder / "b.txt").write_bytes("first line\nsecond line, café\n".encode("latin-1"))
    argv = ["generate-calibration", "--docs", folder, "--n", "1", "--out", tmp_path / "g.jsonl"]
    _fails(argv, capsys, f"{folder / 'b.txt'}:2:", "not UTF-8")


def test_text_null_is_no_longer_indexed_as_the_string_none(tmp_path) -> None:
    from conformal_rag_plugins.datasets.examples import load_corpus

    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": None}])
    with pytest.raises(InputFileError, match=r"c\.jsonl:1: 'text' must be a string, got null"):
        load_corpus(path)
    assert issubclass(InputFileError, CalibrationError) and issubclass(InputFileError, ConformalError)


# --- 6., 7. and 9. qa and questions files -------------------------------------------------------------


BAD_QA = {
    "binary": (b"\x00\x01\x02\xff\xfe\xfd", "not UTF-8 text", 1),
    "latin-1": ('{"question": "Où est la Normandie ?", "context_id": "normans"}\n'.encode("latin-1"), "not UTF-8", 1),
    "invalid json": (b'{"question": "A?", "context_id": "rollo"}\n\n{"question": oops}\n', "invalid JSON", 3),
    "a list": (b'["What?", "rollo"]\n', "got an array", 1),
    "a number": (b'{"question": "A?", "context_id": "rollo"}\n7\n', "got a number", 2),
    "no question": (b'{"question": "A?", "context_id": "rollo"}\n{"answers": ["x"]}\n', "'question' is missing", 2),
    "question null": (b'{"question": null, "context_id": "rollo"}\n', "'question' must be a non-empty string", 1),
    "empty": (b"", "holds no questions", None),
}


@pytest.mark.parametrize("case", sorted(BAD_QA))
@pytest.mark.parametrize("command", ["evaluate", "evaluate --answers", "calibrate", "label"])
def test_bad_qa_and_question_files_name_the_file_and_line(tmp_path, corpus, capsys, command, case) -> None:
    data, message, line = BAD_QA[case]
    path = tmp_path / "qa.jsonl"
    path.write_bytes(data)
    where = f"{path}:{line}:" if line else f"{path}:"
    _fails(_qa_commands(corpus, tmp_path)[command](path), capsys, where, message)


@pytest.mark.parametrize("command", ["evaluate", "evaluate --answers", "calibrate", "label"])
@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_missing_or_directory_qa(tmp_path, corpus, capsys, command, kind) -> None:
    path = tmp_path / "nope.jsonl"
    if kind == "directory":
        path.mkdir()
    _fails(_qa_commands(corpus, tmp_path)[command](path), capsys, str(path), "no such" if kind == "missing" else "dir")


def test_no_answerable_question_is_refused(tmp_path, corpus, capsys) -> None:
    rows = [{"id": "u", "question": "Unanswerable?", "answers": [], "is_impossible": True}]
    qa = write_jsonl(tmp_path / "qa.jsonl", rows)
    _fails(_evaluate(corpus, qa, tmp_path / "o.json"), capsys, str(qa), "no answerable questions")


def test_a_subprocess_run_prints_one_line_and_no_traceback(tmp_path, corpus) -> None:
    """The console entry point as a user runs it, with a Latin-1 qa file."""
    qa = tmp_path / "qa.jsonl"
    qa.write_bytes('{"question": "Qui a fondé le duché ?", "context_id": "rollo"}\n'.encode("latin-1"))
    env = {**os.environ, "CONFORMAL_RAG_CACHE": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "conformal_rag_plugins.cli", *map(str, _evaluate(corpus, qa, tmp_path / "o.json"))]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"conformal-rag: error: {qa}:1: not UTF-8 text (byte 0xe9 at column 25); the qa file must be UTF-8 encoded "
        "JSONL."
    ]


# --- 10. output paths: checked before the work, written atomically ------------------------------------


def _output_commands(corpus: Path, qa: Path, questions: Path, out: Path) -> dict:
    return {
        "evaluate": _evaluate(corpus, qa, out),
        "evaluate --answers": [*_evaluate(corpus, qa, out), "--answers"],
        "calibrate": ["calibrate", "--corpus", corpus, "--questions", questions, "--out", out],
        "generate-calibration": ["generate-calibration", "--corpus", corpus, "--n", "1", "--out", out],
        "label": ["label", "--corpus", corpus, "--questions", questions, "--out", out],
    }


@pytest.fixture
def no_input_reading(monkeypatch):
    """Tripwires on the first step of the work: reading the inputs."""
    from conformal_rag_plugins.commands import evaluate_answer_sets as evaluate_answers
    from conformal_rag_plugins.commands import evaluate_retrieval as evaluate
    from conformal_rag_plugins.commands import input_checks

    def tripwire(*args, **kwargs):
        raise AssertionError("the inputs were read before the output path was checked")

    for module in (evaluate, evaluate_answers):
        monkeypatch.setattr(module, "load_corpus", tripwire)
    monkeypatch.setattr(calibration_inputs, "load_chunks", tripwire)
    monkeypatch.setattr(input_checks, "load_questions", tripwire)
    monkeypatch.setattr(input_checks, "read_questions", tripwire)


@pytest.mark.parametrize("command", ["evaluate", "evaluate --answers", "calibrate", "generate-calibration", "label"])
@pytest.mark.parametrize("kind", ["missing directory", "a directory", "parent is a file"])
def test_output_paths_are_checked_before_the_work(
    tmp_path, corpus, qa, questions, capsys, no_input_reading, command, kind
) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    out = {
        "missing directory": tmp_path / "no" / "such" / "dir" / "out.json",
        "a directory": tmp_path,
        "parent is a file": tmp_path / "a-file" / "out.json",
    }[kind]
    expected = {"missing directory": "does not exist", "a directory": "is a directory", "parent is a file": "not a dir"}
    _fails(_output_commands(corpus, qa, questions, out)[command], capsys, str(out), expected[kind])


def test_demo_output_folder_is_checked_before_the_work(monkeypatch, tmp_path, capsys) -> None:
    from conformal_rag_plugins.commands import demo

    monkeypatch.setattr(demo, "bundled_corpus", lambda: pytest.fail("demo started its work"))
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    _fails(["demo", "--out", tmp_path / "a-file" / "out", "--no-answers"], capsys, "a-file", "not a directory")
    _fails(["demo", "--out", tmp_path / "a-file", "--no-answers"], capsys, "a-file", "not a directory")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions, not root")
def test_unwritable_output_directory_is_refused(tmp_path, corpus, qa, capsys, no_input_reading) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _fails(_evaluate(corpus, qa, locked / "out.json"), capsys, str(locked), "not writable")
    finally:
        locked.chmod(0o700)


def test_check_output_helpers(tmp_path) -> None:
    assert check_output_file(tmp_path / "new.json") == tmp_path / "new.json"
    assert check_output_dir(tmp_path / "new" / "nested") == tmp_path / "new" / "nested"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    with pytest.raises(FileNotFoundError) as info:
        check_output_file(tmp_path / "missing" / "out.json")
    assert info.value.filename == str(tmp_path / "missing" / "out.json")
    with pytest.raises(IsADirectoryError):
        check_output_file(tmp_path)


def test_atomic_write_replaces_whole_files_only(tmp_path) -> None:
    target = tmp_path / "report.json"
    atomic_write_text(target, '{"old": true}\n')
    assert target.read_text(encoding="utf-8") == '{"old": true}\n'
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # like open(), not mkstemp's 0600
    with pytest.raises(UnicodeEncodeError):  # fails half-way: the text cannot be encoded
        atomic_write_text(target, '{"new": "' + "x" * 100_000 + '\ud800"}')
    assert target.read_text(encoding="utf-8") == '{"old": true}\n'  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary left behind


def test_atomic_path_leaves_no_partial_file(tmp_path) -> None:
    target = tmp_path / "calibration.json"
    with pytest.raises(RuntimeError, match="disk full"), atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp != target
        tmp.write_text('{"half": ', encoding="utf-8")
        raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []  # neither the target nor the temporary
    with atomic_path(target) as tmp:
        tmp.write_text("{}\n", encoding="utf-8")
        assert not target.exists()  # nothing visible until the block succeeds
    assert target.read_text(encoding="utf-8") == "{}\n"


def test_a_failing_save_in_the_cli_leaves_no_output(monkeypatch, tmp_path, corpus, capsys) -> None:
    """``generate-calibration`` writes through ``atomic_path``: a save that dies half-way leaves nothing."""
    from types import SimpleNamespace

    import conformal_rag_plugins.llamaindex.framework as li_framework  # the name FRAMEWORK calls
    from conformal_rag_plugins.datasets import examples
    from conformal_rag_plugins.datasets.examples import CalibrationExample

    def half_save(items, path):
        Path(path).write_text('{"question": "half', encoding="utf-8")
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(examples, "save_examples", half_save)
    monkeypatch.setattr(calibration_inputs, "build_llm", lambda *a, **k: object())
    generated = [CalibrationExample("Who led them?", gold_ids=("rollo",), answers=("Rollo",))]
    report = SimpleNamespace(n_generated=1)  # an empty run is refused before the save (test_generate_dead_endpoint.py)
    monkeypatch.setattr(li_framework, "generate_calibration_questions", lambda *a, **k: (generated, report))
    out = tmp_path / "g.jsonl"
    _fails(["generate-calibration", "--corpus", corpus, "--n", "1", "--out", out, "--quiet"], capsys,
           "No space left on device")  # fmt: skip
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # the temporary is gone too


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- issue 21: negative seeds, outputs that are inputs ------------------------------------------------


def _seed_commands(corpus: Path, qa: Path, questions: Path, tmp: Path) -> dict:
    return {
        "demo": ["demo", "--out", tmp / "demo", "--persist-dir", tmp / "chroma", "--no-answers"],
        "evaluate": _evaluate(corpus, qa, tmp / "o.json"),
        "evaluate --answers": [*_evaluate(corpus, qa, tmp / "o.json"), "--answers"],
        "calibrate": ["calibrate", "--corpus", corpus, "--questions", questions, "--out", tmp / "c.json"],
        "generate-calibration": ["generate-calibration", "--corpus", corpus, "--n", "1", "--out", tmp / "g.jsonl"],
        "monitor": ["monitor", "--corpus", corpus, "--qa", qa, "--stream", qa, "--json", tmp / "m.json"],
    }


@pytest.mark.parametrize("seed", ["-1", "-20"])
@pytest.mark.parametrize(
    "command", ["demo", "evaluate", "evaluate --answers", "calibrate", "generate-calibration", "monitor"]
)
def test_negative_seeds_are_refused(monkeypatch, tmp_path, corpus, qa, questions, capsys, command, seed) -> None:
    from conformal_rag_plugins.commands import demo

    monkeypatch.setattr(demo, "bundled_corpus", lambda: pytest.fail("demo started its work"))
    argv = _seed_commands(corpus, qa, questions, tmp_path)[command]
    _fails([*argv, "--seed", seed], capsys, "seed must be an integer >= 0", seed)


def _self_overwrites(corpus: Path, qa: Path, questions: Path, tmp: Path) -> dict:
    """Each command with an output path that is one of its inputs: ``(argv, the input overwritten)``."""
    calibration = tmp / "cal.json"
    calibration.write_text("{}", encoding="utf-8")
    report_dir = tmp / "report"
    report_dir.mkdir()
    heldout = write_jsonl(report_dir / "report.json", _qa_rows())  # the report would write report.json over it
    return {
        "evaluate --json QA": (_evaluate(corpus, qa, qa), qa),
        "evaluate --json CORPUS": (_evaluate(corpus, qa, corpus), corpus),
        "evaluate --answers": ([*_evaluate(corpus, qa, qa), "--answers"], qa),
        "calibrate": (["calibrate", "--corpus", corpus, "--questions", questions, "--out", questions], questions),
        "calibrate --out CORPUS": (
            ["calibrate", "--corpus", corpus, "--questions", questions, "--out", corpus],
            corpus,
        ),
        "label": (["label", "--corpus", corpus, "--questions", questions, "--out", questions], questions),
        "generate-calibration": (["generate-calibration", "--corpus", corpus, "--n", "1", "--out", corpus], corpus),
        "monitor --json": (
            ["monitor", "--corpus", corpus, "--qa", qa, "--stream", questions, "--json", questions],
            questions,
        ),
        "monitor --save-monitor": (
            [
                "monitor",
                "--corpus",
                corpus,
                "--qa",
                qa,
                "--stream",
                questions,
                "--json",
                tmp / "m.json",
                "--save-monitor",
                qa,
            ],
            qa,
        ),
        "report": (
            ["report", "--calibration", calibration, "--corpus", corpus, "--qa", heldout, "--out", report_dir],
            heldout,
        ),
    }


SELF_OVERWRITES = [
    "evaluate --json QA", "evaluate --json CORPUS", "evaluate --answers", "calibrate", "calibrate --out CORPUS",
    "label", "generate-calibration", "monitor --json", "monitor --save-monitor", "report",
]  # fmt: skip


@pytest.mark.parametrize("case", SELF_OVERWRITES)
def test_an_output_path_that_is_an_input_is_refused(tmp_path, corpus, qa, questions, capsys, case) -> None:
    argv, victim = _self_overwrites(corpus, qa, questions, tmp_path)[case]
    before = victim.read_bytes()
    _fails(argv, capsys, str(victim), "also an input")
    assert victim.read_bytes() == before


def test_the_same_file_under_another_name_is_refused(tmp_path, corpus, qa, capsys) -> None:
    """Paths are compared resolved: ``./sub/../qa.jsonl`` and a symlink are the qa file."""
    (tmp_path / "sub").mkdir()
    _fails(_evaluate(corpus, qa, tmp_path / "sub" / ".." / "qa.jsonl"), capsys, "also an input")
    link = tmp_path / "link.jsonl"
    link.symlink_to(qa)
    _fails(_evaluate(corpus, qa, link), capsys, "also an input")
    assert json.loads(qa.read_text(encoding="utf-8").splitlines()[0])["id"] == "q1"
