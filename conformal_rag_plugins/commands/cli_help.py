"""How ``conformal-rag --help`` reads: every option's default, one usage example per sub-command.

:class:`Parser` is the ``argparse`` parser of the command and of every sub-command (the
sub-parsers inherit its class), so a ``register`` function only adds its options and an
``epilog=examples(...)``; the formatter appends the default an option's help text does not
already state.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["HelpFormatter", "Parser", "examples", "warn_ignored"]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that names every option's default, and keeps the epilog's example lines as written.

    A help text that already mentions its default is left alone; otherwise a required option
    gets ``(required)``, an option without a default ``(default: none)`` and any other
    ``(default: VALUE)``. Flags without a value (``--quiet``) are off unless given and get nothing.
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
    """``argparse.ArgumentParser`` with :class:`HelpFormatter` unless another is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


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


def warn_ignored(command: str, given: Iterable[str], reason: str) -> None:
    """One line on stderr for deprecated options a command accepts but does not use.

    Examples
    --------
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     warn_ignored("calibrate", ["--llm"], "it calls no LLM")
    >>> err.getvalue().startswith("conformal-rag: warning: calibrate ignores --llm (it calls no LLM)")
    True
    """
    flags = [flag for flag in given]
    if flags:
        print(
            f"conformal-rag: warning: {command} ignores {', '.join(flags)} ({reason}); deprecated, "
            "to be removed in a future release",
            file=sys.stderr,
        )
