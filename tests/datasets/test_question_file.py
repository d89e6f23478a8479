"""One question file format for every command (issue 23, part 1).

``calibrate``/``label`` read labelled lines (``gold_ids``/``gold_texts``) and ``evaluate``,
``report`` and ``monitor`` read SQuAD-style lines (``context_id``, ``answers``); each refused or
silently dropped the other form's gold. Now every command reads both, says which it read, and
takes ``--qa`` and ``--questions`` as one flag. Most tests stop each command where its work
would start (the step that receives the questions is replaced by a recorder), so they run in
seconds; two end-to-end runs at the end calibrate on SQuAD-style lines and report on labelled ones.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/datasets/jsonl_input.py

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import _parser, main
from conformal_rag_plugins.commands import calibration_inputs, input_checks
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.datasets.question_file import load_qa
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

from ..norman_files import ENTRIES, QUESTIONS, write_corpus, write_jsonl

UNANSWERABLE = {"id": "u1", "question": "Who painted the Seine in 911?", "answers": [], "context_id": "seine",
                "is_impossible": True, "plausible_answers": ["Monet"]}  # fmt: skip
SQUAD_NOTE = "(SQuAD-style: question, context_id, answers"
LABELLED_NOTE = "(labelled: question, gold_ids/gold_texts"


class Reached(ConformalError):
    """Raised by a recorder where a command's work would start (the CLI prints it as an error)."""


def _squad_rows() -> list[dict]:
    return [
        {"id": i, "question": q, "answers": [a], "context_id": c, "is_impossible": False} for i, q, a, c in QUESTIONS
    ]


def _labelled_rows() -> list[dict]:
    """As ``label`` writes them (``to_dict``: every field, metadata nested)."""
    return [
        {"question": q, "gold_ids": [c], "gold_texts": [], "answers": [a], "id": i, "is_impossible": False,
         "metadata": {"label_rule": "judge"}}
        for i, q, a, c in QUESTIONS
    ]  # fmt: skip


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def squad(tmp_path) -> Path:
    return write_jsonl(tmp_path / "squad.jsonl", [*_squad_rows(), UNANSWERABLE])


@pytest.fixture
def labelled(tmp_path) -> Path:
    return write_jsonl(tmp_path / "labelled.jsonl", _labelled_rows())


@pytest.fixture(autouse=True)
def no_heavy_work(request, monkeypatch, tmp_path):
    """No LLM, no index (but in the end-to-end test): a command that gets this far has a bug in the test."""
    from conformal_rag_plugins.commands import evaluate_answer_sets, hosts

    if request.node.get_closest_marker("integration") is not None:
        return

    def tripwire(*args, **kwargs):
        raise AssertionError("the command started its work")

    monkeypatch.setenv("CONFORMAL_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration_inputs, "build_llm", tripwire)
    monkeypatch.setattr(hosts, "build_hosts", tripwire)
    monkeypatch.setattr(hosts, "build_host", tripwire)
    from conformal_rag_plugins.local import chroma

    monkeypatch.setattr(chroma, "chroma_client", lambda *a, **k: None)  # no Chroma in the fast tier
    monkeypatch.setattr(evaluate_answer_sets, "build_host", tripwire)


def _key(ex) -> tuple:
    return (ex.id, ex.question, ex.gold_ids, ex.answers, ex.is_impossible)


# --- the reader -----------------------------------------------------------------------------------------


def test_both_forms_read_to_the_same_questions(squad, labelled, tmp_path) -> None:
    """The two public loaders read either form; today each drops the other form's gold."""
    labelled_with_unanswerable = write_jsonl(
        tmp_path / "l2.jsonl",
        [*_labelled_rows(), {"id": "u1", "question": UNANSWERABLE["question"], "gold_ids": ["seine"],
                             "is_impossible": True, "plausible_answers": ["Monet"]}],
    )  # fmt: skip
    want = [_key(ex) for ex in load_qa(squad)]
    assert [ex.gold_ids for ex in load_qa(squad)] == [("normans",), ("rollo",), ("seine",), ("hastings",), ("seine",)]
    for path in (squad, labelled_with_unanswerable):
        assert [_key(ex) for ex in load_qa(path)] == want
        assert [_key(ex) for ex in input_checks.load_questions(path)] == want
        assert [_key(ex) for ex in load_qa(path, answerable_only=True)] == want[:4]
        assert load_qa(path)[4].metadata["plausible_answers"] == ["Monet"]  # other fields stay in metadata
    assert input_checks.read_questions(squad).form == "squad"
    assert input_checks.read_questions(labelled).form == "labelled"
    assert input_checks.load_questions(labelled)[0].metadata == {"label_rule": "judge"}
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"question": q} for _, q, _, _ in QUESTIONS])
    assert input_checks.read_questions(bare).form == "questions"


def test_gold_texts_and_lines_without_gold_fit_either_form(tmp_path) -> None:
    rows = [
        {"question": "A?", "gold_texts": ["Rollo was the Viking leader."]},
        {"question": "B?", "gold_ids": [], "gold_texts": []},  # unlabelled (label found nothing): no form
        {"question": "C?", "gold_ids": ["rollo"]},
    ]
    file = input_checks.read_questions(write_jsonl(tmp_path / "q.jsonl", rows))
    assert file.form == "labelled" and [ex.gold_texts for ex in file.examples][:2] == [
        ("Rollo was the Viking leader.",),
        (),
    ]
    squad = input_checks.read_questions(
        write_jsonl(tmp_path / "s.jsonl", [{"question": "A?"}, {"question": "B?", "context_id": "x"}])
    )
    assert squad.form == "squad" and squad.lines == (1, 2)


# --- the same flag under both names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "dest", "rest"),
    [
        ("calibrate", "questions", ["--corpus", "c.jsonl", "--out", "c.json"]),
        ("label", "questions", ["--corpus", "c.jsonl", "--out", "l.jsonl"]),
        ("evaluate", "qa", ["--corpus", "c.jsonl", "--alpha", "0.1", "--json", "o.json"]),
        ("report", "qa", ["--calibration", "c.json", "--corpus", "c.jsonl", "--out", "r"]),
        ("monitor", "qa", ["--corpus", "c.jsonl", "--stream", "s.jsonl", "--json", "o.json"]),
    ],
)
@pytest.mark.parametrize("flag", ["--qa", "--questions"])
def test_qa_and_questions_are_one_flag(command, dest, rest, flag) -> None:
    args = _parser().parse_args([command, flag, "questions.jsonl", *rest])
    assert getattr(args, dest) == "questions.jsonl"


# --- every command reads both forms ---------------------------------------------------------------------


def _stderr_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("form", ["squad", "labelled"])
@pytest.mark.parametrize("flag", ["--qa", "--questions"])
def test_calibrate_reads_both_forms_and_skips_unanswerable_lines(
    monkeypatch, tmp_path, corpus, squad, labelled, capsys, form, flag
) -> None:
    from conformal_rag_plugins.commands import calibrate_cmd

    seen: list = []

    def recorder(framework, chunks, examples, *args, **kwargs):
        seen.extend(examples)
        raise Reached("reached the calibration")

    monkeypatch.setattr(calibrate_cmd, "_tuned", recorder)
    path = squad if form == "squad" else labelled
    argv = ["calibrate", "--corpus", corpus, flag, path, "--out", tmp_path / "c.json", "--persist-dir", tmp_path / "db"]
    assert main([str(a) for a in argv]) == 2
    lines = _stderr_lines(capsys)
    assert lines[-1] == "conformal-rag: error: reached the calibration"
    assert [(ex.id, ex.gold_ids) for ex in seen] == [(i, (c,)) for i, _, _, c in QUESTIONS]  # no unanswerable one
    if form == "squad":
        assert lines[0] == (
            f"read 5 questions from {squad} {SQUAD_NOTE}, 1 of them unanswerable); calibrating on the 4 answerable ones"
        )
    else:
        assert lines[0] == f"read 4 questions from {labelled} {LABELLED_NOTE})"


def test_calibrate_names_the_line_of_an_unlabelled_question(tmp_path, corpus, capsys) -> None:
    rows = [*_labelled_rows()[:2], {"question": "Unlabelled?", "gold_ids": [], "gold_texts": []}]
    path = write_jsonl(tmp_path / "labelled.jsonl", rows)
    argv = ["calibrate", "--corpus", corpus, "--questions", path, "--out", tmp_path / "c.json"]
    assert main([str(a) for a in argv]) == 2
    (line,) = _stderr_lines(capsys)
    assert line.startswith(f"conformal-rag: error: {path}:3: the question has no gold") and "1 such line" in line


@pytest.mark.parametrize("form", ["squad", "labelled"])
def test_evaluate_reads_both_forms_with_chunk_or_document_gold(
    monkeypatch, tmp_path, squad, labelled, capsys, form
) -> None:
    """Labelled gold may name a chunk of a split document; its document is the gold of document units."""
    from conformal_rag_plugins.commands import evaluate_retrieval

    long_text = " ".join(
        ["The Normans were a people in the north of France."] * 8 + ["Rollo founded the duchy in 911."]
    )
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl", [{"id": i, "text": long_text if i == "rollo" else t} for i, t in ENTRIES]
    )
    seen: dict = {}

    def recorder(framework, kind, documents, questions, chunked, **kwargs):
        seen.update(questions=questions, chunked=chunked)
        raise Reached("reached the retrieval")

    monkeypatch.setattr(evaluate_retrieval, "collect_candidates", recorder)
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
    from conformal_rag_plugins.datasets.examples import load_corpus

    chunks = chunk_corpus("llamaindex", load_corpus(corpus), [], chunk_size=48, chunk_overlap=0).chunks
    (answer_chunk,) = [c.id for c in chunks if "Rollo founded" in c.text]
    assert answer_chunk.startswith("rollo::chunk") and len([c for c in chunks if c.parent_id == "rollo"]) > 1
    rows = _squad_rows() if form == "squad" else _labelled_rows()
    if form == "labelled":  # the chunk that holds the answer, as `label` would name it
        rows[1]["gold_ids"] = [answer_chunk]
    path = write_jsonl(tmp_path / f"{form}.jsonl", rows)
    argv = ["evaluate", "--corpus", corpus, "--questions", path, "--alpha", "0.1", "--json", tmp_path / "o.json",
            "--chunk-size", "48", "--chunk-overlap", "0", "--retriever", "dense"]  # fmt: skip
    assert main([str(a) for a in argv]) == 2
    lines = _stderr_lines(capsys)
    assert lines == [
        f"read 4 questions from {path} {SQUAD_NOTE if form == 'squad' else LABELLED_NOTE})",
        "conformal-rag: error: reached the retrieval",
    ]
    assert [ex.gold_ids for ex in seen["questions"]] == [(c,) for *_, c in QUESTIONS]  # document level
    chunk_gold = seen["chunked"].questions[1].gold_ids
    assert chunk_gold == (answer_chunk,)  # the answer's chunk, mapped from the document or given


@pytest.mark.parametrize("flag", ["--qa", "--questions"])
def test_monitor_calibrates_on_labelled_lines(monkeypatch, tmp_path, corpus, labelled, capsys, flag) -> None:
    from conformal_rag_plugins.commands import monitor_cmd

    seen: list = []

    def recorder(framework, chunks, examples, here, **kwargs):
        seen.extend(examples)
        raise Reached("reached the calibration")

    monkeypatch.setattr(monitor_cmd, "calibrate_here", recorder)
    stream = write_jsonl(tmp_path / "stream.jsonl", [{"question": "Where is Normandy?"}])
    argv = ["monitor", "--corpus", corpus, flag, labelled, "--stream", stream, "--json", tmp_path / "m.json"]
    assert main([str(a) for a in argv]) == 2
    assert _stderr_lines(capsys) == [
        f"read 4 questions from {labelled} {LABELLED_NOTE}); every one is in the monitor's reference",
        "conformal-rag: error: reached the calibration",
    ]
    assert [ex.gold_ids for ex in seen] == [(c,) for *_, c in QUESTIONS]


def test_label_keeps_the_gold_of_squad_lines(monkeypatch, tmp_path, corpus, squad, capsys) -> None:
    """A question the judge cannot place keeps the gold it came with; a SQuAD-style line's is its context_id."""
    from types import SimpleNamespace

    import conformal_rag_plugins.llamaindex.framework as li_framework  # the name FRAMEWORK calls
    from conformal_rag_plugins.commands import hosts

    seen: list = []

    def recorder(host, examples, *args, **kwargs):
        seen.extend(examples)
        raise Reached("reached the judge")

    monkeypatch.setattr(hosts, "build_host", lambda *a, **k: SimpleNamespace(host=None))
    monkeypatch.setattr(calibration_inputs, "build_llm", lambda *a, **k: None)
    monkeypatch.setattr(li_framework, "label_with_judge", recorder)
    argv = ["label", "--corpus", corpus, "--qa", squad, "--out", tmp_path / "l.jsonl", "--budget", "0"]
    assert main([str(a) for a in argv]) == 2
    assert _stderr_lines(capsys)[0].startswith(f"read 5 questions from {squad} {SQUAD_NOTE}")
    assert [ex.gold_ids for ex in seen] == [(c,) for *_, c in QUESTIONS] + [("seine",)]


# --- mixed and garbled files: one error line naming file and line ---------------------------------------


def _calibration_file(tmp_path: Path) -> Path:
    fp = Fingerprint("langchain", "ScoredFusionRetriever[Chroma+BM25]", "cosine", "m", 384, "fusion:zscore",
                     "hybrid(method=zscore,weight=0.5,k=50)")  # fmt: skip
    cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 50, 20, 0, (0.1,) * 20, fp)
    cal.save(tmp_path / "cal.json")
    return tmp_path / "cal.json"


def _commands(corpus: Path, tmp: Path) -> dict:
    stream = write_jsonl(tmp / "stream.jsonl", [{"question": "Where is Normandy?"}])
    evaluate = ["evaluate", "--corpus", corpus, "--alpha", "0.1", "--json", tmp / "o.json", "--qa"]
    return {
        "evaluate": evaluate,
        "evaluate --answers": ["evaluate", "--answers", *evaluate[1:]],
        "calibrate": ["calibrate", "--corpus", corpus, "--out", tmp / "c.json", "--questions"],
        "label": ["label", "--corpus", corpus, "--out", tmp / "l.jsonl", "--questions"],
        "report": ["report", "--calibration", _calibration_file(tmp), "--corpus", corpus, "--out", tmp / "r", "--qa"],
        "monitor": ["monitor", "--corpus", corpus, "--stream", stream, "--json", tmp / "m.json", "--qa"],
    }


GARBLED = {
    "labelled line in a SQuAD file": (
        [*_squad_rows()[:2], _labelled_rows()[2]],
        3,
        "a labelled (gold_ids/gold_texts) line, but line 1 made this a SQuAD-style (context_id) file",
    ),
    "SQuAD line in a labelled file": (
        [{"question": "Bare?"}, *_labelled_rows()[:2], _squad_rows()[3]],
        4,
        "a SQuAD-style (context_id) line, but line 2 made this a labelled (gold_ids/gold_texts) file",
    ),
    "both forms on one line": (
        [_squad_rows()[0], _squad_rows()[1] | {"gold_ids": ["rollo"]}],
        2,
        "both a SQuAD-style 'context_id' and labelled 'gold_ids'/'gold_texts'",
    ),
    "gold_ids a number": ([_labelled_rows()[0] | {"gold_ids": 7}], 1, "'gold_ids' must be a list of strings"),
    "gold_texts of numbers": ([{"question": "A?", "gold_texts": [1, 2]}], 1, "'gold_texts' must be a list of strings"),
    "is_impossible a string": ([_squad_rows()[0] | {"is_impossible": "no"}], 1, "'is_impossible' must be true or"),
    "metadata a list": ([_labelled_rows()[0] | {"metadata": [1]}], 1, "'metadata' must be an object"),
}


@pytest.mark.parametrize("case", sorted(GARBLED))
@pytest.mark.parametrize("command", ["evaluate", "evaluate --answers", "calibrate", "label", "report", "monitor"])
def test_mixed_or_garbled_lines_are_one_error_line_with_file_and_line(tmp_path, corpus, capsys, command, case) -> None:
    rows, line, message = GARBLED[case]
    path = write_jsonl(tmp_path / "questions.jsonl", rows)
    code = main([str(a) for a in [*_commands(corpus, tmp_path)[command], path]])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (only,) = err.strip().splitlines()
    assert only.startswith(f"conformal-rag: error: {path}:{line}: ") and message in only, only


# --- end to end on the real stack: calibrate on SQuAD-style lines, report on labelled ones ----------------


@pytest.mark.integration
def test_calibrate_on_squad_lines_then_report_on_labelled_lines(tmp_path, capsys) -> None:
    """The first 40 paragraphs; calibrate (dense) on 80 of their SQuAD-style lines, answerable or not, via --qa;
    report on labelled lines of 40 other answerable questions via --questions."""
    from conformal_rag_plugins.datasets.examples import save_examples
    from conformal_rag_plugins.local.data import bundled_corpus_paths

    source = bundled_corpus_paths()[0]
    entries = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line][:40]
    ids = {e["id"] for e in entries}
    rows = [json.loads(line) for line in source.with_name("qa.jsonl").read_text(encoding="utf-8").splitlines() if line]
    mine = [r for r in rows if r["context_id"] in ids]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"id": e["id"], "text": e["text"]} for e in entries])
    cal_qa = write_jsonl(tmp_path / "cal_qa.jsonl", mine[:80])
    n_unanswerable = sum(r["is_impossible"] for r in mine[:80])
    held_out = [r for r in mine[80:] if not r["is_impossible"]][:40]
    labelled = tmp_path / "heldout_labelled.jsonl"
    save_examples(load_qa(write_jsonl(tmp_path / "held.jsonl", held_out)), labelled)
    assert '"gold_ids"' in labelled.read_text() and '"context_id"' not in labelled.read_text()

    out = tmp_path / "calibration.json"
    argv = ["calibrate", "--corpus", corpus, "--qa", cal_qa, "--retriever", "dense", "--persist-dir", tmp_path / "db",
            "--out", out, "--quiet"]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    err = capsys.readouterr().err
    assert 10 <= n_unanswerable <= 70
    assert (
        f"read 80 questions from {cal_qa} {SQUAD_NOTE}, {n_unanswerable} of them unanswerable); calibrating on the "
        f"{80 - n_unanswerable} answerable ones"
    ) in err
    cal = RetrievalCalibration.load(out)
    assert cal.n_calibration_ == 80 - n_unanswerable  # every answerable line, no unanswerable one

    report_dir = tmp_path / "report"
    argv = ["report", "--calibration", out, "--corpus", corpus, "--questions", labelled, "--out", report_dir, "--quiet"]
    assert main([str(a) for a in argv]) == 0
    assert f"read 40 questions from {labelled} {LABELLED_NOTE})" in capsys.readouterr().err
    report = json.loads((report_dir / "report.json").read_text())
    assert report["question_format"] == "labelled" and report["n_heldout"] == 40
