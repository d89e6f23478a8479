"""MkDocs hook: the command-line reference, generated from the ``conformal-rag`` parser at build time.

``mkdocs.yml`` lists this file under ``hooks:``. A page that holds the line
``<!-- cli-reference -->`` gets it replaced by one section per sub-command: what it does, its
usage line, every option with its default and help text, and its usage example. Nothing here
is written by hand, so the page cannot fall behind the parser. ``tests/docs/test_docs.py``
checks that every sub-command and every option of the parser appears in the rendered text.
"""

from __future__ import annotations

import argparse
from typing import Any

MARKER = "<!-- cli-reference -->"

__all__ = ["MARKER", "build_parser", "on_page_markdown", "render", "sub_commands"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``conformal-rag`` command, exactly as the command builds it."""
    from conformal_rag_plugins import cli

    return cli._parser()


def sub_commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every sub-command's parser, by name, in the order the command registers them."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    helps = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest] = choice.help or ""
    return helps


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if action.choices:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    if action.metavar:
        return f"`{action.metavar}`"
    return f"`{action.dest.upper()}`"


def _default(action: argparse.Action) -> str:
    if "default" in (action.help or "").lower():
        return "in the text"
    if action.default == argparse.SUPPRESS:
        return "-"
    if action.nargs == 0:
        return "off" if action.default in (False, None) else f"`{action.default}`"
    if action.required:
        return "required"
    if action.default is None:
        return "none"
    return f"`{action.default}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        params = dict(vars(action), prog=parser.prog)
        text = text % params
    if isinstance(action, argparse._AppendAction):
        text = f"{text} (repeatable)" if "repeatable" not in text else text
    return _cell(text)


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options a parser documents (its ``--help`` is left out, as every command has it)."""
    return [
        a
        for a in parser._actions
        if a.option_strings and a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
    ]


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | value | default | what it does |", "|---|---|---|---|"]
    for action in options(parser):
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        rows.append(f"| {names} | {_value(action)} | {_default(action)} | {_help(parser, action)} |")
    return rows


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference as Markdown: the command's own options, then one section per sub-command."""
    parser = parser or build_parser()
    lines = [
        "## `conformal-rag`",
        "",
        _cell(parser.description or ""),
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        *_options_table(parser),
        "",
    ]
    helps = _help_lines(parser)
    for name, sub in sub_commands(parser).items():
        lines += [f"## `conformal-rag {name}`", ""]
        if helps.get(name):
            lines += [_cell(helps[name][:1].upper() + helps[name][1:]) + ".", ""]
        lines += ["```text", sub.format_usage().strip(), "```", ""]
        lines += _options_table(sub)
        lines.append("")
        if sub.epilog:
            lines += ["```bash", *(ln.strip() for ln in sub.epilog.splitlines()[1:] if ln.strip()), "```", ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    """MkDocs event: put the generated reference where a page holds :data:`MARKER`."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
