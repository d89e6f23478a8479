"""Framework-neutral chunking pieces: the ``Chunk`` record, chunk ids, parents, the token-window check.

The adapters supply only ``split(text) -> list[str]``; :func:`chunk_with` keeps a fitting entry
whole (same id), names the pieces of a longer one ``f"{entry.id}::chunk{i}"`` with its
``parent_id`` and title, and re-cuts any piece still too long (:func:`enforce_max_tokens`), so no
chunk ever exceeds ``chunk_size`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..core.errors import CalibrationError
from ..datasets.examples import CorpusEntry

#: Separator between a parent id and the chunk number in a chunk id.
CHUNK_SEPARATOR = "::chunk"


@dataclass(frozen=True)
class Chunk(CorpusEntry):
    """A :class:`CorpusEntry` cut from a parent document; ``parent_id`` defaults to ``id`` (unsplit).

    >>> c = Chunk("Normans#0::chunk1", "text", title="Normans", parent_id="Normans#0")
    >>> c.parent_id, c.is_split, Chunk("doc", "short").parent_id
    ('Normans#0', True, 'doc')
    """

    parent_id: str | None = None

    def __post_init__(self) -> None:
        if self.parent_id is None:
            object.__setattr__(self, "parent_id", self.id)

    @property
    def is_split(self) -> bool:
        """Whether the chunk is a piece of a longer entry (its id differs from its parent's)."""
        return self.id != self.parent_id

    def to_entry(self) -> CorpusEntry:
        """A plain :class:`CorpusEntry` with the same id, text and title."""
        return CorpusEntry(self.id, self.text, self.title)


def chunk_id(parent_id: str, index: int) -> str:
    """Id of chunk ``index`` of a split entry.

    >>> chunk_id("Normans#0", 2)
    'Normans#0::chunk2'
    """
    return f"{parent_id}{CHUNK_SEPARATOR}{index}"


def parent_of(chunks: Iterable[Chunk]) -> dict[str, str]:
    """Map every chunk id to its parent's id.

    >>> parent_of([Chunk("a::chunk0", "x", parent_id="a"), Chunk("b", "y")])
    {'a::chunk0': 'a', 'b': 'b'}
    """
    return {c.id: c.parent_id or c.id for c in chunks}


def chunks_by_parent(chunks: Iterable[Chunk]) -> dict[str, list[Chunk]]:
    """Group chunks under their parent id, keeping their order.

    >>> groups = chunks_by_parent([Chunk("a::chunk0", "x", parent_id="a"), Chunk("a::chunk1", "y", parent_id="a")])
    >>> [c.id for c in groups["a"]]
    ['a::chunk0', 'a::chunk1']
    """
    out: dict[str, list[Chunk]] = {}
    for c in chunks:
        out.setdefault(c.parent_id or c.id, []).append(c)
    return out


def _cut_word(word: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """Cut one over-long word into the longest character prefixes that fit."""
    pieces = []
    rest = word
    while rest:
        if count(rest) <= max_tokens:
            pieces.append(rest)
            break
        lo, hi = 1, len(rest)  # largest prefix length that fits; a single character always does
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(rest[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        pieces.append(rest[:lo])
        rest = rest[lo:]
    return pieces


def enforce_max_tokens(text: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """Cut ``text`` greedily at word boundaries into pieces of at most ``max_tokens`` (``[text]`` if it fits).

    Words are joined with one space; a single word longer than the window is cut by characters.

    >>> enforce_max_tokens("a b c d e", 2, lambda t: len(t.split()))
    ['a b', 'c d', 'e']
    >>> enforce_max_tokens("abcdef", 2, len)
    ['ab', 'cd', 'ef']
    """
    if max_tokens < 1:
        raise CalibrationError(f"max_tokens must be positive, got {max_tokens}.")
    if count(text) <= max_tokens:
        return [text]
    pieces: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if count(candidate) <= max_tokens:
            current = candidate
            continue
        if current:
            pieces.append(current)
        if count(word) <= max_tokens:
            current = word
        else:
            *full, current = _cut_word(word, max_tokens, count)
            pieces.extend(full)
    if current:
        pieces.append(current)
    return pieces


def check_max_tokens(chunks: Iterable[Chunk], max_tokens: int, count: Callable[[str], int]) -> int:
    """Raise if any chunk exceeds ``max_tokens``; return the largest count.

    >>> check_max_tokens([Chunk("a", "x y"), Chunk("b", "z")], 2, lambda t: len(t.split()))
    2
    """
    largest = 0
    for c in chunks:
        n = count(c.text)
        if n > max_tokens:
            raise CalibrationError(f"Chunk {c.id!r} has {n} tokens, more than the window of {max_tokens}.")
        largest = max(largest, n)
    return largest


def chunk_with(
    entries: Iterable[CorpusEntry],
    split: Callable[[str], Sequence[str]],
    *,
    chunk_size: int,
    count: Callable[[str], int],
) -> list[Chunk]:
    """Chunk entries in order with ``split`` (called only on entries over ``chunk_size``), enforcing the window.

    >>> words = lambda t: len(t.split())
    >>> halves = lambda t: [" ".join(t.split()[:3]), " ".join(t.split()[3:])]
    >>> chunks = chunk_with([CorpusEntry("d", "a b c d e f"), CorpusEntry("s", "g")], halves, chunk_size=3, count=words)
    >>> [(c.id, c.text, c.parent_id) for c in chunks]
    [('d::chunk0', 'a b c', 'd'), ('d::chunk1', 'd e f', 'd'), ('s', 'g', 's')]
    """
    if chunk_size < 1:
        raise CalibrationError(f"chunk_size must be positive, got {chunk_size}.")
    out: list[Chunk] = []
    seen: set[str] = set()
    for entry in entries:
        if count(entry.text) <= chunk_size:
            pieces = [entry.text]
        else:
            pieces = []
            for piece in split(entry.text):
                if piece.strip():
                    pieces.extend(enforce_max_tokens(piece.strip(), chunk_size, count))
        if len(pieces) <= 1:
            new = [Chunk(entry.id, pieces[0] if pieces else entry.text, title=entry.title, parent_id=entry.id)]
        else:
            new = [
                Chunk(chunk_id(entry.id, i), text, title=entry.title, parent_id=entry.id)
                for i, text in enumerate(pieces)
            ]
        for c in new:
            if c.id in seen:
                raise CalibrationError(f"Duplicate chunk id {c.id!r}; entry ids must be unique.")
            seen.add(c.id)
        out.extend(new)
    check_max_tokens(out, chunk_size, count)
    return out


def chunk_within(
    entries: Iterable[CorpusEntry],
    split_for: Callable[[int], Callable[[str], Sequence[str]]],
    *,
    chunk_size: int,
    count: Callable[[str], int],
    reserve: Callable[[CorpusEntry], int],
) -> list[Chunk]:
    """:func:`chunk_with` per entry, in the room ``reserve(entry)`` (its embedded title) leaves of ``chunk_size``.

    ``split_for(room)`` is the splitter for that room; chunk ids must stay unique across entries.

    >>> words = lambda t: len(t.split())
    >>> halves = lambda room: lambda t: [" ".join(t.split()[:room]), " ".join(t.split()[room:])]
    >>> entries = [CorpusEntry("d", "a b c d", title="T"), CorpusEntry("s", "g")]
    >>> [c.id for c in chunk_within(entries, halves, chunk_size=3, count=words, reserve=lambda e: len(e.title or ""))]
    ['d::chunk0', 'd::chunk1', 's']
    """
    out: list[Chunk] = []
    seen: set[str] = set()
    for entry in entries:
        room = chunk_size - reserve(entry)
        if room < 1:
            raise CalibrationError(
                f"The title of {entry.id!r} alone fills the {chunk_size}-token chunk window; shorten it or raise "
                "chunk_size."
            )
        for chunk in chunk_with([entry], split_for(room), chunk_size=room, count=count):
            if chunk.id in seen:
                raise CalibrationError(f"Duplicate chunk id {chunk.id!r}; entry ids must be unique.")
            seen.add(chunk.id)
            out.append(chunk)
    return out
