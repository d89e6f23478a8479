"""Cut long corpus entries into MiniLM-sized chunks with LangChain's ``RecursiveCharacterTextSplitter``.

The splitter measures length with the MiniLM tokenizer
(``from_huggingface_tokenizer``), so every chunk is embedded in full; see
:mod:`conformal_rag_plugins.labelling.chunk_records` for the id scheme and the window guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with, parent_of
from ..local.tokens import count_tokens, default_chunk_overlap, default_chunk_size, embedding_tokenizer

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

__all__ = ["Chunk", "chunk_entries", "parent_of", "recursive_splitter"]


def recursive_splitter(
    chunk_size: int | None = None, chunk_overlap: int | None = None
) -> RecursiveCharacterTextSplitter:
    """LangChain ``RecursiveCharacterTextSplitter`` measuring MiniLM word pieces.

    Examples
    --------
    >>> recursive_splitter()._chunk_size  # doctest: +SKIP
    254
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    size = default_chunk_size() if chunk_size is None else chunk_size
    overlap = min(default_chunk_overlap(), size // 2) if chunk_overlap is None else chunk_overlap
    return RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        embedding_tokenizer(), chunk_size=size, chunk_overlap=overlap
    )


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
    >>> chunks[-1].id, chunks[-1].parent_id  # doctest: +SKIP
    ('d::chunk7', 'd')
    """
    splitter = recursive_splitter(chunk_size, chunk_overlap)
    size = default_chunk_size() if chunk_size is None else chunk_size
    return chunk_with(entries, splitter.split_text, chunk_size=size, count=count_tokens)
