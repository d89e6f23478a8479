"""Checks run before any long work: counts, output paths, gold ids, question files.

Each failure is a ``ConformalError`` (or an ``OSError`` naming the path), printed as one
``conformal-rag: error: ...`` line with exit code 2.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import CalibrationError, ConformalError, InputFileError
from ..datasets.examples import CalibrationExample
from ..datasets.question_file import QuestionFile
from ..runtime.atomic import check_output_dir, check_output_file
from ..runtime.paths import resolved


def check_at_least(name: str, value: int, minimum: int = 1, maximum: int | None = None) -> int:
    """Refuse an integer option below ``minimum`` (``--trials 0``, a negative ``--pool-size``) or above ``maximum``.

    Examples
    --------
    >>> check_at_least("trials", 5)
    5
    >>> check_at_least("trials", 0)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: trials must be an integer >= 1, got 0.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConformalError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    if maximum is not None and value > maximum:
        shown = str(value) if len(str(value)) <= 20 else f"{str(value)[:17]}... ({len(str(value))} digits)"
        raise ConformalError(f"{name} must be an integer between {minimum} and {maximum}, got {shown}.")
    return value


def whole_number_option(flag: str, text: str | None, minimum: int = 1) -> int | None:
    """An optional integer option read as text: ``None`` stays ``None``, anything else must be a whole number.

    Not an integer (``abc``, ``2.5``) or below ``minimum`` is a :class:`ConformalError` worded as
    :func:`check_at_least` words it, so the command line prints one ``conformal-rag: error:`` line
    (``argparse``'s own ``type=int`` would print its usage block instead).

    Examples
    --------
    >>> whole_number_option("--passage-sentences", "3"), whole_number_option("--passage-sentences", None)
    (3, None)
    >>> whole_number_option("--passage-sentences", "two")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: --passage-sentences must be an integer >= 1, got 'two'.
    """
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConformalError(f"{flag} must be an integer >= {minimum}, got {text!r}.") from None
    return check_at_least(flag, value, minimum)


#: Largest ``--pool-size`` (candidates retrieved and scored per question): far above any useful pool,
#: low enough that the pool matrices fit in memory and the stores accept it.
MAX_POOL_SIZE = 100_000


#: Largest ``--trials`` (random calibration/test splits): 10**30 would never end; a thousand already gives
#: a coverage estimate to within a few thousandths.
MAX_TRIALS = 100_000


def check_trials(value: int, name: str = "trials") -> int:
    """Refuse a number of random splits below 1 or above :data:`MAX_TRIALS` (a run that would never end).

    Examples
    --------
    >>> check_trials(10**30)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: trials must be an integer between 1 and 100000, got ...
    """
    return check_at_least(name, value, 1, MAX_TRIALS)


def check_pool_option(name: str, value: int) -> int:
    """Refuse a pool size below 1 or above :data:`MAX_POOL_SIZE`, before anything is indexed.

    Examples
    --------
    >>> check_pool_option("pool_size", 10**30)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: pool_size must be an integer between 1 and 100000, got ...
    """
    return check_at_least(name, value, 1, MAX_POOL_SIZE)


def check_chunking(chunk_size: int | None, chunk_overlap: int | None) -> None:
    """Refuse ``--chunk-size`` below 1, a negative ``--chunk-overlap`` or one not below the chunk size.

    ``None`` is the default (254 tokens, overlap 25 or at most half the chunk size).

    Examples
    --------
    >>> check_chunking(100, 20)
    >>> check_chunking(100, 100)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: --chunk-overlap must be smaller than --chunk-size (100), got 100.
    """
    if chunk_size is not None:
        check_at_least("--chunk-size", chunk_size)
    if chunk_overlap is None:
        return
    check_at_least("--chunk-overlap", chunk_overlap, 0)
    if chunk_size is None:
        from ..local.tokens import default_chunk_size

        size, shown = default_chunk_size(), f"the default {default_chunk_size()}"
    else:
        size, shown = chunk_size, str(chunk_size)
    if chunk_overlap >= size:
        raise ConformalError(f"--chunk-overlap must be smaller than --chunk-size ({shown}), got {chunk_overlap}.")


def check_outputs(
    files: Iterable[str | Path | None] = (),
    dirs: Iterable[str | Path | None] = (),
    *,
    inputs: Iterable[Any] = (),
) -> None:
    """Check every output path (``None`` skipped) before the work starts; raise ``OSError`` naming it.

    ``files`` need an existing writable parent and must not be directories or one of ``inputs``;
    ``dirs`` must be (or be creatable as) writable directories.
    """
    files = [path for path in files if path is not None]
    for path in files:
        check_output_file(path)
    for path in dirs:
        if path is not None:
            check_output_dir(path)
    check_not_inputs(files, inputs)


def _same_file(a: Path, b: Path) -> bool:
    if resolved(a) == resolved(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:  # one of them does not exist
        return False


def check_not_inputs(outputs: Iterable[str | Path], inputs: Iterable[Any]) -> None:
    """Refuse an output path that names an input file (non-path inputs are skipped).

    Compared resolved (``..``, symbolic links) and, when both exist, as files (hard links).

    Examples
    --------
    >>> check_not_inputs(["report.json"], ["qa.jsonl", None])
    >>> check_not_inputs(["qa.jsonl"], ["corpus.jsonl", "sub/../qa.jsonl"])
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: qa.jsonl: the output path is also an input file ...
    """
    sources = [Path(p) for p in inputs if isinstance(p, str | os.PathLike)]
    for out in outputs:
        for source in sources:
            if _same_file(Path(out), source):
                raise ConformalError(
                    f"{out}: the output path is also an input file ({source}); writing it would overwrite the "
                    "input, so choose another output path."
                )


def check_output_options(
    files: Mapping[str, Any], dirs: Mapping[str, Any] | None = None, *, inputs: Iterable[Any] = (), cache: Any = None
) -> None:
    """:func:`check_distinct_outputs` over every output option (and ``--cache``), then :func:`check_outputs`."""
    dirs = dirs or {}
    check_distinct_outputs({**files, **dirs, **({} if cache is None else {"--cache": cache})})
    check_outputs(files=files.values(), dirs=dirs.values(), inputs=inputs)


def check_distinct_outputs(outputs: Mapping[str, Any]) -> None:
    """Refuse two output options (``{"--json": path}``) naming the same path, as :func:`check_not_inputs` compares.

    ``None``, booleans and ``":memory:"`` are skipped.

    Examples
    --------
    >>> check_distinct_outputs({"--json": "out.json", "--save-monitor": "./out.json"})
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.ConformalError: --json and --save-monitor both name out.json: one output ...
    """
    named = [
        (flag, Path(path))
        for flag, path in outputs.items()
        if isinstance(path, str | os.PathLike) and str(path) != ":memory:"
    ]
    for (flag_a, a), (flag_b, b) in itertools.combinations(named, 2):
        if _same_file(a, b):
            raise ConformalError(
                f"{flag_a} and {flag_b} both name {a}: one output would overwrite the other, so give them "
                "different paths."
            )


def check_gold_in_corpus(examples: Sequence[CalibrationExample], known_ids: Collection[str], source: Any) -> None:
    """Refuse gold ids (qa ``context_id``) missing from the corpus, naming the question file.

    The calibrators' own check, so ``evaluate`` and ``calibrate`` refuse the same files (a typo would
    otherwise count as a miss and inflate set sizes).
    """
    from ..retrieval.pool_calibration import check_gold_ids

    try:
        check_gold_ids(examples, known_ids)
    except CalibrationError as exc:
        raise InputFileError(f"{source}: ids not in the corpus: {exc}") from exc


def read_questions(path: str | Path, what: str = "questions") -> QuestionFile:
    """Read a question file of either form (SQuAD-style or labelled): the one reader of every command.

    Errors are ``InputFileError`` with ``path:line``; announce with :func:`announce_questions` after checks.
    """
    from ..datasets.question_file import read_question_file

    return read_question_file(path, what)


def announce_questions(file: QuestionFile, note: str = "") -> None:
    """Say on stderr which questions were read, and in which form (after the checks; stdout stays JSON)."""
    print(file.describe() + (f"; {note}" if note else ""), file=sys.stderr)


def load_questions(path: str | Path) -> list[CalibrationExample]:
    """Every question of a question file of either form (see :func:`read_questions`)."""
    return list(read_questions(path).examples)
