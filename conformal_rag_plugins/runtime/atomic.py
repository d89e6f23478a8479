"""Write output files atomically, and check output paths before long work starts.

A temporary sibling (same file system) is moved over the target with :func:`os.replace` only when
complete: a crash or full disk leaves the previous file (or none), never a partial one. The checks
raise plain :class:`OSError` subclasses with ``filename`` (this package imports nothing else from
the library); the command line reports them in one line.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def _temp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


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

    On an exception it is removed and ``path`` is left as it was; for writers taking a path. An
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
