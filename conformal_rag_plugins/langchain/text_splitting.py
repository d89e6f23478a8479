"""Split corpus entries with LangChain's ``RecursiveCharacterTextSplitter`` (ids: ``chunk_records.chunk_with``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with
from ..local.langchain_models import recursive_splitter
from ..local.tokens import chunk_window, count_tokens


def chunk_entries(
    entries: Iterable[CorpusEntry], *, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> list[Chunk]:
    """Split entries over ``chunk_size`` MiniLM tokens (default 254, overlap 25) at paragraphs, lines, words.

    As the LlamaIndex ``chunk_entries``: ``f"{id}::chunk{i}"`` with ``parent_id=id``, within the window.
    """
    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return chunk_with(entries, recursive_splitter(size, overlap).split_text, chunk_size=size, count=count_tokens)
