"""Cut long corpus entries into MiniLM-sized chunks with LlamaIndex's ``SentenceSplitter``.

The splitter counts MiniLM word pieces (:func:`~conformal_rag_plugins.local.tokens.token_ids`),
so every chunk is embedded in full; see :mod:`conformal_rag_plugins.labelling.chunk_records`
for the id scheme and the window guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with, parent_of
from ..local.tokens import count_tokens, default_chunk_overlap, default_chunk_size, token_ids

if TYPE_CHECKING:
    from llama_index.core.node_parser import SentenceSplitter

__all__ = ["Chunk", "chunk_entries", "parent_of", "sentence_splitter"]


def sentence_splitter(chunk_size: int | None = None, chunk_overlap: int | None = None) -> SentenceSplitter:
    """LlamaIndex ``SentenceSplitter`` measuring MiniLM word pieces.

    Examples
    --------
    >>> sentence_splitter().chunk_size  # doctest: +SKIP
    254
    """
    from llama_index.core.node_parser import SentenceSplitter

    size = default_chunk_size() if chunk_size is None else chunk_size
    overlap = min(default_chunk_overlap(), size // 2) if chunk_overlap is None else chunk_overlap
    return SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=token_ids)


def chunk_entries(
    entries: Iterable[CorpusEntry],
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> list[Chunk]:
    """Split entries longer than ``chunk_size`` MiniLM tokens; shorter ones stay whole.

    Parameters
    ----------
    entries : iterable of CorpusEntry
    chunk_size : int, optional
        Tokens per chunk; default :func:`~conformal_rag_plugins.local.tokens.default_chunk_size` (254).
    chunk_overlap : int, optional
        Default :func:`~conformal_rag_plugins.local.tokens.default_chunk_overlap` (25).

    Returns
    -------
    list of Chunk
        Chunks of a split entry are ``f"{id}::chunk{i}"`` with ``parent_id=id``; no
        chunk exceeds ``chunk_size`` tokens.

    Examples
    --------
    >>> from conformal_rag_plugins.datasets.examples import CorpusEntry
    >>> chunks = chunk_entries([CorpusEntry("d", "One. " * 300)], chunk_size=100)  # doctest: +SKIP
    >>> chunks[0].id, chunks[0].parent_id  # doctest: +SKIP
    ('d::chunk0', 'd')
    """
    splitter = sentence_splitter(chunk_size, chunk_overlap)
    return chunk_with(entries, splitter.split_text, chunk_size=splitter.chunk_size, count=count_tokens)
