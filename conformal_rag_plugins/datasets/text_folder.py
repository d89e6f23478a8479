"""Turn a folder of text files into corpus entries (for users with only their documents)."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import CalibrationError
from .examples import CorpusEntry


def load_text_folder(path: str | Path, glob: str = "*.txt", *, encoding: str = "utf-8") -> list[CorpusEntry]:
    """One :class:`CorpusEntry` per matching file, sorted by path.

    The id is the file's path relative to ``path`` (with ``/`` separators), the title its
    stem. Use ``glob="**/*.txt"`` to include sub-folders. Files holding only white space
    are skipped. Long files are usually chunked next: make framework documents with the entries' ids
    (they stay the same on every run) and split them with ``local.sentence_splitter()`` (LlamaIndex)
    or ``local.recursive_splitter()`` (LangChain), as the example notebooks do.

    Raises
    ------
    CalibrationError
        When ``path`` is not a folder, or no non-empty file matches.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "normans.txt").write_text("The Normans were led by Rollo.", encoding="utf-8")
    >>> [(e.id, e.title) for e in load_text_folder(folder)]
    [('normans.txt', 'normans')]
    """
    root = Path(path)
    if not root.is_dir():
        raise CalibrationError(f"{root} is not a folder; pass a folder of text files.")
    entries = []
    for file in sorted(p for p in root.glob(glob) if p.is_file()):
        text = file.read_text(encoding=encoding)
        if text.strip():
            entries.append(CorpusEntry(file.relative_to(root).as_posix(), text, title=file.stem))
    if not entries:
        raise CalibrationError(f"No non-empty files matching {glob!r} in {root}; nothing to generate questions from.")
    return entries
