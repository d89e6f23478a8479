"""Split corpus entries with LlamaIndex's ``SentenceSplitter`` (window and ids: ``chunk_records.chunk_within``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

from llama_index.core.node_parser import SentenceSplitter

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_within
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

    def split_for(room: int) -> Callable[[str], list[str]]:
        return _splitter(room, min(overlap, room // 2)).split_text

    return chunk_within(
        entries, split_for, chunk_size=size, count=count_tokens, reserve=lambda e: title_tokens(e.title)
    )
