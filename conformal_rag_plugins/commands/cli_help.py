"""How ``conformal-rag --help`` reads: every option's default, one usage example per sub-command.

Sub-parsers inherit :class:`Parser`, so a ``register`` function only adds options and an
``epilog=examples(...)``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import fields
from typing import Any, NoReturn, TypeVar

_R = TypeVar("_R")


PERSIST_DIR_HELP = (
    "Chroma directory (default: $CONFORMAL_RAG_CACHE/chroma when that variable is set, else "
    "~/.cache/conformal-rag/chroma)"
)
"""The ``--persist-dir`` help of every command that indexes into Chroma (the cache variable moves the default)."""

CACHE_HELP = (
    "SQLite cache of LLM outputs (default: $CONFORMAL_RAG_CACHE when that variable is set, else ~/.cache/conformal-rag)"
)
"""The ``--cache`` help (the same variable moves its default)."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that names every option's default, and keeps the epilog's example lines as written.

    Unless the help already mentions it: ``(required)``, ``(default: none)`` or
    ``(default: VALUE)``; value-less flags (``--quiet``) get nothing.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if text == argparse.SUPPRESS or not action.option_strings or action.nargs == 0:
            return action.help
        if "default" in text.lower():
            return text
        if action.required:
            suffix = "(required)"
        elif action.default is None:
            suffix = "(default: none)"
        else:
            suffix = "(default: %(default)s)"
        return f"{text} {suffix}" if text else suffix


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with :class:`HelpFormatter` unless another is given, and one-line errors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error as one line on stderr, exit status 2 (argparse would print its usage block first).

        Examples
        --------
        >>> Parser(prog="conformal-rag").error("argument --n: invalid int value: 'abc'")  # doctest: +SKIP
        conformal-rag: error: argument --n: invalid int value: 'abc' (see conformal-rag --help)
        """
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def examples(*lines: str) -> str:
    """The epilog of a sub-command: its usage examples, one command per line.

    Examples
    --------
    >>> print(examples("conformal-rag demo --no-answers"))
    example:
      conformal-rag demo --no-answers
    """
    head = "example:" if len(lines) == 1 else "examples:"
    return "\n".join([head, *(f"  {line}" for line in lines)])


def command(sub: Any, name: str, help: str, *example_lines: str, handler: Any = None) -> argparse.ArgumentParser:
    """Add sub-command ``name`` with its ``help``, its :func:`examples` epilog and (if any) ``handler(args)``."""
    parser = sub.add_parser(name, help=help, epilog=examples(*example_lines))
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


#: The help of ``--chunk-size``/``--chunk-overlap`` on commands that must chunk as ``calibrate`` did.
AS_CALIBRATE = ("as given to calibrate (default 254)", "as given to calibrate (default 25)")


def add_chunk_options(parser: argparse.ArgumentParser, size: str, overlap: str, whole: str | None = None) -> None:
    """``--chunk-size``, ``--chunk-overlap`` and (with its help ``whole``) ``--no-chunking``."""
    parser.add_argument("--chunk-size", type=int, default=None, help=size)
    parser.add_argument("--chunk-overlap", type=int, default=None, help=overlap)
    if whole is not None:
        parser.add_argument("--no-chunking", action="store_true", help=whole)


def changed_options(parser: argparse.ArgumentParser, args: argparse.Namespace, dests: Iterable[str]) -> list[str]:
    """The options among ``dests`` of ``args.command`` whose value is not their default (as typed flags).

    Examples
    --------
    >>> p = Parser(prog="x")
    >>> s = p.add_subparsers(dest="command").add_parser("run")
    >>> _ = s.add_argument("--pool-size", type=int, default=50)
    >>> _ = s.add_argument("--quiet", action="store_true")
    >>> changed_options(p, p.parse_args(["run", "--pool-size", "9"]), ["pool_size", "quiet"])
    ['--pool-size']
    """
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    command = subparsers.choices[args.command]
    wanted = set(dests)
    return [
        action.option_strings[0]
        for action in command._actions
        if action.dest in wanted and getattr(args, action.dest) != action.default
    ]


def warn_ignored(command: str, given: Iterable[str], reason: str, *, deprecated: bool = False) -> None:
    """One line on stderr naming the options a command accepts but does not use (nothing when none is given).

    Examples
    --------
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     warn_ignored("calibrate", ["--llm"], "it calls no LLM", deprecated=True)
    ...     warn_ignored("calibrate", [], "nothing given: no line")
    >>> err.getvalue().splitlines()
    ['conformal-rag: warning: calibrate ignores --llm (it calls no LLM); deprecated, to be removed in a future release']
    """
    flags = list(given)
    if flags:
        tail = "; deprecated, to be removed in a future release" if deprecated else ""
        print(f"conformal-rag: warning: {command} ignores {', '.join(flags)} ({reason}){tail}", file=sys.stderr)


def request_from(cls: type[_R], args: argparse.Namespace, **renamed: Any) -> _R:
    """The request dataclass ``cls``: each field from the option of the same name, ``renamed`` for the others.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Request:
    ...     out: str
    ...     chunking: bool = True
    >>> request_from(Request, argparse.Namespace(out="o.json", no_chunking=True, quiet=False), chunking=False)
    Request(out='o.json', chunking=False)
    """
    given = [f.name for f in fields(cls) if f.name not in renamed and hasattr(args, f.name)]  # type: ignore[arg-type]
    return cls(**{name: getattr(args, name) for name in given}, **renamed)
