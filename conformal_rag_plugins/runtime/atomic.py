"""Write output files atomically, and check output paths before long work starts.

A temporary sibling (same file system) is moved over the target with :func:`os.replace` only when
complete: a crash or full disk leaves the previous file (or none), never a partial one. A run that
writes several files (a report's page, JSON and figures) writes them as one unit (:func:`write_unit`):
a staging folder takes the output folder's place in one step. The checks
raise plain :class:`OSError` subclasses with ``filename`` (this package imports nothing else from
the library); the command line reports them in one line.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path


def _temp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def _remove_stale_temps(path: Path) -> None:
    """Remove the temporary siblings of ``path`` that a killed writer left (their process is gone)."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(?P<pid>\d+)\.[0-9a-f]{{8}}\.tmp$")
    with suppress(OSError):
        for entry in path.parent.iterdir():
            match = pattern.match(entry.name)
            if match and not _alive(int(match["pid"])) and entry.is_file():
                with suppress(OSError):
                    entry.unlink()


def check_replaceable(path: str | Path) -> None:
    """Refuse to replace an existing ``path`` that is not a regular file (a device, FIFO or socket).

    An atomic write moves a new file over ``path``: onto ``/dev/null`` or a named pipe that would
    replace the device or pipe with a regular file. A new path, or a symbolic link to a regular
    file, is fine. Raises ``FileExistsError`` naming ``path``.

    Examples
    --------
    >>> check_replaceable("/dev/null")
    Traceback (most recent call last):
    ...
    FileExistsError: [Errno 17] exists and is not a regular file (a device, FIFO or socket), so it is not replaced: ...
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing (or a dangling link): a new file, or an error the write itself reports
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a directory gets IsADirectoryError elsewhere
        raise FileExistsError(
            errno.EEXIST,
            "exists and is not a regular file (a device, FIFO or socket), so it is not replaced: "
            "give the path of a regular file or a new one",
            str(path),
        )


def check_output_file(path: str | Path) -> Path:
    """Check, without creating it, that a file can be written at ``path``.

    Raises ``FileNotFoundError`` (no parent directory), ``NotADirectoryError`` (parent not a
    directory), ``IsADirectoryError`` (``path`` is one), ``FileExistsError`` (``path`` exists and is
    not a regular file: a device or FIFO, see :func:`check_replaceable`) or ``PermissionError``
    (parent or existing file not writable).

    Examples
    --------
    >>> import tempfile
    >>> check_output_file(Path(tempfile.mkdtemp()) / "missing" / "out.json")
    Traceback (most recent call last):
    ...
    FileNotFoundError: [Errno 2] output directory ...missing does not exist: '...out.json'
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not an output file", str(path))
    check_replaceable(path)
    parent = path.parent
    if not parent.exists():
        raise FileNotFoundError(errno.ENOENT, f"output directory {parent} does not exist", str(path))
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{parent} is not a directory", str(path))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"output directory {parent} is not writable", str(path))
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, "output file exists and is not writable", str(path))
    return path


def check_output_dir(path: str | Path) -> Path:
    """Check that ``path`` is, or can be created as, a writable directory (nothing is created).

    Missing parents are fine: the closest existing ancestor must be a writable directory
    (``NotADirectoryError``, ``PermissionError`` otherwise).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", str(path))
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{probe} exists and is not a directory", str(path))
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"directory {probe} is not writable", str(path))
    return path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write, moved over ``path`` when the block succeeds.

    On an exception it is removed and ``path`` is left as it was; for writers taking a path. The
    temporary siblings of ``path`` that a killed writer left (its process gone) are removed first. An
    existing ``path`` that is not a regular file is refused first (:func:`check_replaceable`).

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_path(target) as tmp:
    ...     _ = tmp.write_text("done", encoding="utf-8")
    >>> target.read_text(encoding="utf-8")
    'done'
    """
    path = Path(path)
    check_replaceable(path)
    _remove_stale_temps(path)  # what a writer killed before its rename (kill -9) left behind
    tmp = _temp_sibling(path)
    try:
        yield tmp
        if not tmp.exists():  # the writer wrote nothing: an empty output, as open(path, "w") would give
            tmp.touch()
        check_replaceable(path)  # again: a FIFO may have been made at ``path`` while the writer ran
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` atomically (temporary sibling, fsync, :func:`os.replace`), with :func:`open`'s permissions."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding=encoding) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    return path


_STAGED = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.run\.tmp$")


def check_unit_targets(folder: str | Path, names: Iterable[str]) -> None:
    """Refuse, before any work, a file of a run that cannot be replaced: a directory, device or FIFO at its path.

    Raises ``IsADirectoryError`` or ``FileExistsError`` naming the path (nothing is written).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "report.json").mkdir()
    >>> check_unit_targets(folder, ["index.html", "report.json"])
    Traceback (most recent call last):
    ...
    IsADirectoryError: [Errno 21] is a directory, not an output file: ...report.json'
    """
    for name in names:
        path = Path(folder) / name
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory, not an output file", str(path))
        check_replaceable(path)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where that is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _remove_stale_stages(folder: Path) -> None:
    """Remove staging folders a killed run left beside ``folder`` (their process is gone)."""
    with suppress(OSError):
        for entry in folder.parent.iterdir():
            match = _STAGED.match(entry.name)
            if match and match["name"] == folder.name and not _alive(int(match["pid"])):
                shutil.rmtree(entry, ignore_errors=True)


def write_unit(folder: str | Path, files: Mapping[str, bytes], owned: Iterable[str] = ()) -> Path:
    """Write a run's ``files`` (name -> bytes) into ``folder`` as one unit: all of them, or none.

    Every file is written and synced in a staging folder beside ``folder`` (same file system), which
    then takes ``folder``'s place in one step: renamed when ``folder`` does not exist, exchanged with it
    (Linux ``renameat2``) when it holds only files of such runs (``files`` and ``owned``). A crash or
    ``kill -9`` before that step leaves ``folder`` as it was, never new figures beside an old report;
    the staging folder it leaves is removed by the next run. When ``folder`` holds other files (the
    user's), is a symbolic link, or the exchange is not available, the files are moved in one by one
    (each atomically, in a few milliseconds). A target that cannot be replaced is refused first
    (:func:`check_unit_targets`).

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "report"
    >>> _ = write_unit(out, {"report.json": b"{}", "a.png": b"png"})
    >>> sorted(p.name for p in out.iterdir())
    ['a.png', 'report.json']
    >>> _ = write_unit(out, {"report.json": b"{}"}, owned=["a.png"])  # a figure the new run does not draw goes
    >>> sorted(p.name for p in out.iterdir())
    ['report.json']
    """
    folder = Path(folder)
    check_unit_targets(folder, files)
    _remove_stale_stages(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staged = folder.with_name(f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.run.tmp")
    staged.mkdir()
    try:
        for name, data in files.items():
            fd = os.open(staged / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        check_unit_targets(folder, files)  # again: a FIFO may have been made meanwhile
        mine = set(files) | set(owned)
        if not folder.exists() and not folder.is_symlink():
            os.rename(staged, folder)
            return folder
        whole = folder.is_dir() and not folder.is_symlink() and all(p.name in mine for p in folder.iterdir())
        if not (whole and _exchange(staged, folder)):
            for name in files:  # the user's own files stay: each of ours replaced atomically
                os.replace(staged / name, folder / name)
    finally:
        shutil.rmtree(staged, ignore_errors=True)  # after an exchange: the previous run's files
    return folder
