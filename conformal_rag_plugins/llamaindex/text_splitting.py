"""Cut long corpus entries into MiniLM-sized chunks with LlamaIndex's ``SentenceSplitter``.

Only the splitter (:func:`~conformal_rag_plugins.local.llamaindex_models.sentence_splitter`) is
LlamaIndex's: the window is :func:`~conformal_rag_plugins.local.tokens.chunk_window` and the ids,
parents and window guarantee are :func:`~conformal_rag_plugins.labelling.chunk_records.chunk_with`'s.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with
from ..local.llamaindex_models import sentence_splitter
from ..local.tokens import chunk_window, count_tokens


def chunk_entries(
    entries: Iterable[CorpusEntry], *, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> list[Chunk]:
    """Split entries longer than ``chunk_size`` MiniLM tokens at sentences; shorter ones stay whole.

    Parameters
    ----------
    entries : iterable of CorpusEntry
    chunk_size, chunk_overlap : int, optional
        Default: MiniLM's window (254 tokens) and 25 tokens.

    Returns
    -------
    list of Chunk
        ``f"{id}::chunk{i}"`` with ``parent_id=id`` for a split entry, none over ``chunk_size`` tokens.

    Examples
    --------
    >>> chunks = chunk_entries([CorpusEntry("d", "One. " * 300)], chunk_size=100)  # doctest: +SKIP
    >>> chunks[0].id, chunks[0].parent_id  # doctest: +SKIP
    ('d::chunk0', 'd')
    """
    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return chunk_with(entries, sentence_splitter(size, overlap).split_text, chunk_size=size, count=count_tokens)
