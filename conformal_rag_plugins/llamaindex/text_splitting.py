"""Split corpus entries with LlamaIndex's ``SentenceSplitter`` (window and ids: ``chunk_records.chunk_with``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with
from ..local.llamaindex_models import sentence_splitter
from ..local.tokens import chunk_window, count_tokens


def chunk_entries(
    entries: Iterable[CorpusEntry], *, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> list[Chunk]:
    """Split entries longer than ``chunk_size`` MiniLM tokens (default 254, overlap 25) at sentences.

    Shorter entries stay whole; pieces are ``f"{id}::chunk{i}"`` with ``parent_id=id``, none over ``chunk_size``.
    """
    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return chunk_with(entries, sentence_splitter(size, overlap).split_text, chunk_size=size, count=count_tokens)
