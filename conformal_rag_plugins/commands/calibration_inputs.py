"""Shared inputs of ``conformal-rag generate-calibration`` and ``label``: corpus, chunks, the LLM."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import ConformalError, InputFileError
from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk
from .cli_help import CACHE_HELP
from .framework_registry import FRAMEWORKS, get_framework

LLM_KINDS = ("local", "openai")


def add_corpus_arguments(parser: argparse.ArgumentParser, *, llm: bool = True) -> None:
    """``--corpus``/``--docs``, the chunking, ``--framework``, ``--llm`` and the cache options.

    With ``llm=False`` the LLM and cache options are still accepted (old scripts keep running) but
    hidden from the help; the command names them with :func:`ignored_llm_options`.
    """
    parser.add_argument(
        "--corpus", action="append", help="corpus JSONL {id, text, title?} (repeatable; this or --docs is required)"
    )
    parser.add_argument("--docs", help="a folder of text files (instead of --corpus) (default: none)")
    parser.add_argument("--glob", default="*.txt", help="files of --docs to read (default *.txt; **/*.txt recurses)")
    parser.add_argument("--chunk-size", type=int, default=None, help="MiniLM tokens per chunk (default 254)")
    parser.add_argument("--chunk-overlap", type=int, default=None, help="tokens of overlap (default 25)")
    parser.add_argument("--framework", choices=FRAMEWORKS, default=FRAMEWORKS[0], help="whose splitter and index")
    if llm:
        parser.add_argument(
            "--llm", choices=LLM_KINDS, default="local", help="local Gemma 3 270M, or OpenAI(-compatible)"
        )
        parser.add_argument("--cache", default=None, help=CACHE_HELP)
        parser.add_argument("--no-cache", action="store_true", help="do not cache LLM outputs")
    else:
        parser.add_argument("--llm", choices=LLM_KINDS, default=None, help=argparse.SUPPRESS)
        parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def ignored_llm_options(args: argparse.Namespace) -> list[str]:
    """The LLM options given to a command registered with ``add_corpus_arguments(llm=False)``.

    Examples
    --------
    >>> ignored_llm_options(argparse.Namespace(llm="local", cache=None, no_cache=True))
    ['--llm', '--no-cache']
    """
    given = {"--llm": args.llm is not None, "--cache": args.cache is not None, "--no-cache": args.no_cache}
    return [flag for flag, was_given in given.items() if was_given]


def cache_setting(args: argparse.Namespace) -> str | bool:
    """The ``cache=`` argument of the adapters from ``--cache`` / ``--no-cache``.

    Examples
    --------
    >>> cache_setting(argparse.Namespace(no_cache=False, cache=None)), cache_setting(argparse.Namespace(no_cache=True))
    (True, False)
    """
    if args.no_cache:
        return False
    return args.cache if args.cache else True


def load_chunks(
    framework: str,
    corpus: Sequence[str | Path] | None,
    docs: str | Path | None,
    *,
    glob: str = "*.txt",
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> list[Chunk]:
    """Read ``--corpus`` files or a ``--docs`` folder and chunk them with the framework's splitter.

    Generation and labelling must chunk alike, so that the chunk ids match.
    """
    if bool(corpus) == bool(docs):
        raise ConformalError("Pass the corpus as --corpus FILE.jsonl (repeatable) or as --docs FOLDER (one of them).")
    entries: list[CorpusEntry]
    if docs:
        from ..datasets.text_folder import load_text_folder

        try:
            entries = load_text_folder(docs, glob)
        except UnicodeDecodeError as exc:
            raise InputFileError(_undecodable_file(docs, glob, exc)) from exc
    else:
        from ..datasets.examples import load_corpus

        entries = load_corpus(*(corpus or ()))
    return get_framework(framework).chunk_entries(entries, chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def input_files(corpus: Sequence[str | Path] | None, docs: str | Path | None, glob: str = "*.txt") -> list[Path]:
    """The files ``--corpus``/``--docs`` read (``docs`` files matching ``glob``), so no output overwrites one.

    Examples
    --------
    >>> [str(p) for p in input_files(["corpus.jsonl"], None)]
    ['corpus.jsonl']
    """
    files = [Path(p) for p in corpus or () if isinstance(p, str | os.PathLike)]
    if docs and Path(docs).is_dir():
        files += sorted(p for p in Path(docs).glob(glob) if p.is_file())
    return files


def request_chunks(request: Any) -> list[Chunk]:
    """:func:`load_chunks` with a command request's ``framework``, ``corpus``/``docs``/``glob`` and chunking."""
    r = request
    return load_chunks(
        r.framework, r.corpus, r.docs, glob=r.glob, chunk_size=r.chunk_size, chunk_overlap=r.chunk_overlap
    )


def request_inputs(request: Any, *more: str | Path) -> list[Path | str]:
    """The files a command request reads (:func:`input_files` of its corpus, then ``more``)."""
    return [*input_files(request.corpus, request.docs, request.glob), *more]


def _undecodable_file(docs: str | Path, glob: str, exc: UnicodeDecodeError) -> str:
    """Name the first file of ``--docs`` that is not UTF-8 (``load_text_folder`` does not say which)."""
    root = Path(docs)
    for file in sorted(p for p in root.glob(glob) if p.is_file()):
        data = file.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            return f"{file}:{line}: not UTF-8 text (byte 0x{data[bad.start]:02x}); --docs files must be UTF-8."
    return f"{root}: a file matching {glob!r} is not UTF-8 text ({exc.reason})."


def build_llm(framework: str, kind: str, *, temperature: float, max_tokens: int) -> Any:
    """The framework's local Gemma 3 270M, or its OpenAI(-compatible) client (``default_llm``)."""
    if kind not in LLM_KINDS:
        raise ConformalError(f"--llm must be one of {LLM_KINDS}, got {kind!r}.")
    if kind == "openai":
        from ..runtime.openai_settings import openai_settings

        if openai_settings() is None:
            raise ConformalError("--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server).")
    return get_framework(framework).build_llm(kind, temperature=temperature, max_tokens=max_tokens)
