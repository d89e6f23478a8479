"""Split corpus entries with LlamaIndex's ``SentenceSplitter`` (window and ids: ``chunk_records.chunk_with``)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from llama_index.core.node_parser import SentenceSplitter

from ..core.errors import CalibrationError
from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with
from ..local.llamaindex_models import sentence_splitter
from ..local.tokens import chunk_window, count_tokens


def title_tokens(title: str | None) -> int:
    """MiniLM word pieces that a node's ``title`` metadata adds to its embedded text (``"title: ..."``).

    >>> title_tokens(None)
    0
    """
    return count_tokens(f"title: {title}") if title else 0


@lru_cache(maxsize=64)
def _splitter(size: int, overlap: int) -> SentenceSplitter:
    return sentence_splitter(size, overlap)


def chunk_entries(
    entries: Iterable[CorpusEntry], *, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> list[Chunk]:
    """Split entries longer than ``chunk_size`` MiniLM tokens (default 254, overlap 25) at sentences.

    The library's LlamaIndex nodes embed their ``title`` with the text, so an entry with a title gets
    that many fewer tokens of text: no embedded chunk passes the window. Shorter entries stay whole;
    pieces are ``f"{id}::chunk{i}"`` with ``parent_id=id``.
    """
    size, overlap = chunk_window(chunk_size, chunk_overlap)
    out: list[Chunk] = []
    seen: set[str] = set()
    for entry in entries:
        room = size - title_tokens(entry.title)
        if room < 1:
            raise CalibrationError(
                f"The title of {entry.id!r} alone fills the {size}-token chunk window; shorten it or raise chunk_size."
            )
        splitter = _splitter(room, min(overlap, room // 2))
        for chunk in chunk_with([entry], splitter.split_text, chunk_size=room, count=count_tokens):
            if chunk.id in seen:
                raise CalibrationError(f"Duplicate chunk id {chunk.id!r}; entry ids must be unique.")
            seen.add(chunk.id)
            out.append(chunk)
    return out
