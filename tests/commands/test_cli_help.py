"""``conformal-rag --help`` explains itself: the version, every option's default, an example per sub-command.

These read the parser only (no corpus is indexed), so they run in a second.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import conformal_rag_plugins
from conformal_rag_plugins.cli import _parser, main

ROOT = Path(__file__).resolve().parents[2]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _option_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text of one option as ``--help`` prints it (defaults expanded, before wrapping)."""
    formatter = parser._get_formatter()
    if formatter._get_help_string(action) is None:  # no help text at all
        return ""
    return formatter._expand_help(action)


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out.strip()
    assert printed == f"conformal-rag {conformal_rag_plugins.__version__}"
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert printed.endswith(" " + tomllib.load(f)["project"]["version"])


def test_top_level_help_names_version() -> None:
    assert "--version" in _parser().format_help()


def test_every_subcommand_is_walked() -> None:
    # the walks below are only as good as the list they walk
    assert set(_subcommands()) == {
        "demo",
        "evaluate",
        "generate-calibration",
        "label",
        "calibrate",
        "monitor",
        "report",
    }


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_option_shows_its_default_or_that_it_is_required(name: str) -> None:
    parser = _subcommands()[name]
    missing = []
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or action.help == argparse.SUPPRESS:
            continue  # positionals, --help and on/off flags (off unless given)
        text = _option_help(parser, action)
        if not re.search(r"\bdefault\b|\(required\)", text, flags=re.IGNORECASE):
            missing.append(f"{'/'.join(action.option_strings)}: {text!r}")
        if action.required:
            assert "(required)" in text, text
    assert not missing, f"conformal-rag {name}: options whose help names no default: {missing}"


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_help_ends_with_a_usage_example(name: str) -> None:
    text = _subcommands()[name].format_help()
    example = text.split("example:", 1)
    assert len(example) == 2, f"conformal-rag {name} --help shows no example"
    command = example[1].strip().splitlines()[0]
    assert command.startswith(f"conformal-rag {name} "), command
    # the example parses: its options exist and every required one is given
    argv = command.split()[1:]
    assert _parser().parse_args(argv).command == name


def test_a_stated_default_is_the_real_one() -> None:
    """The formatter prints ``action.default``; a spot check that it is the value the command uses."""
    evaluate = _subcommands()["evaluate"]
    trials = next(a for a in evaluate._actions if "--trials" in a.option_strings)
    assert "(default: 100)" in _option_help(evaluate, trials)
    assert _parser().parse_args(["evaluate", "--corpus", "c", "--qa", "q", "--alpha", "0.1"]).trials == 100


@pytest.mark.parametrize("command", ["evaluate", "monitor"])
def test_out_and_json_are_one_option(command: str) -> None:
    base = {
        "evaluate": ["evaluate", "--corpus", "c.jsonl", "--qa", "q.jsonl", "--alpha", "0.1"],
        "monitor": ["monitor", "--corpus", "c.jsonl", "--stream", "s.jsonl"],
    }[command]
    parser = _parser()
    assert parser.parse_args([*base, "--out", "r.json"]).json_out == "r.json"
    assert parser.parse_args([*base, "--json", "r.json"]).json_out == "r.json"


def test_calibrate_hides_the_llm_options_it_ignores_and_warns_when_given(tmp_path, capsys) -> None:
    """``calibrate`` calls no LLM: ``--llm``/``--cache``/``--no-cache`` are gone from the help, still accepted."""
    help_text = _subcommands()["calibrate"].format_help()
    for flag in ("--llm", "--cache", "--no-cache"):
        assert flag not in help_text
    assert "--llm" in _subcommands()["label"].format_help()  # label does use them
    out = tmp_path / "cal.json"
    argv = ["calibrate", "--corpus", str(tmp_path / "none.jsonl"), "--questions", str(tmp_path / "none.jsonl")]
    code = main([*argv, "--out", str(out), "--llm", "local", "--cache", str(tmp_path / "c.sqlite")])
    assert code == 2  # the missing input is still reported as before
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "conformal-rag: warning: calibrate ignores --llm, --cache (calibration calls no LLM); deprecated, to be "
        "removed in a future release"
    )
    assert err[1].startswith("conformal-rag: error: ")
    # without them: no warning
    assert main([*argv, "--out", str(out)]) == 2
    assert "warning" not in capsys.readouterr().err


def test_evaluate_names_the_options_its_mode_ignores(tmp_path, capsys) -> None:
    """``--answers`` runs on a fixed host; the retrieval options were silently ignored there (and vice versa)."""
    missing = str(tmp_path / "none.jsonl")
    base = ["evaluate", "--corpus", missing, "--qa", missing, "--alpha", "0.1"]
    assert main([*base, "--answers", "--retriever", "dense", "--pool-size", "20", "--framework", "llamaindex"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("conformal-rag: warning: evaluate --answers ignores --retriever, --pool-size (")
    assert err[1].startswith("conformal-rag: error: ")  # the missing file, as before
    assert main([*base, "--samples", "3"]) == 2
    assert capsys.readouterr().err.startswith("conformal-rag: warning: evaluate without --answers ignores --samples")
    for argv in ([*base, "--answers", "--samples", "3"], [*base, "--retriever", "dense"]):
        assert main(argv) == 2
        assert "warning" not in capsys.readouterr().err, argv


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_a_usage_error_is_one_line_and_exit_2(name, capsys) -> None:
    """Argparse's own errors (unknown option, bad int, bad choice) print one line, not the usage block."""
    for argv in ([name, "--no-such-option"], [name, "--framework", "haystack"], [name, "--chunk-size", "abc"]):
        parser = _subcommands()[name]
        if argv[1] != "--no-such-option" and not any(argv[1] in a.option_strings for a in parser._actions):
            continue  # this sub-command has no such option
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err  # the usage block would add several lines
        assert re.match(rf"conformal-rag( {name})?: error: \S", err), err  # unknown options: the top parser's
        assert "usage:" not in err


def test_a_missing_command_is_one_line_and_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("conformal-rag: error: "), err
