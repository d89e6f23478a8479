"""Cut long corpus entries into MiniLM-sized chunks with LangChain's ``RecursiveCharacterTextSplitter``.

Only the splitter (:func:`~conformal_rag_plugins.local.langchain_models.recursive_splitter`) is LangChain's: the window
is :func:`~conformal_rag_plugins.local.tokens.chunk_window` and the ids, parents and window guarantee
are :func:`~conformal_rag_plugins.labelling.chunk_records.chunk_with`'s.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk, chunk_with
from ..local.langchain_models import recursive_splitter
from ..local.tokens import chunk_window, count_tokens


def chunk_entries(
    entries: Iterable[CorpusEntry], *, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> list[Chunk]:
    """Split entries longer than ``chunk_size`` MiniLM tokens at paragraphs, lines, then words.

    Parameters
    ----------
    entries : iterable of CorpusEntry
    chunk_size, chunk_overlap : int, optional
        Default: MiniLM's window (254 tokens) and 25 tokens.

    Returns
    -------
    list of Chunk
        As the LlamaIndex ``chunk_entries``: ``f"{id}::chunk{i}"``, ``parent_id=id``, within the window.

    Examples
    --------
    >>> chunks = chunk_entries([CorpusEntry("d", "One. " * 300)], chunk_size=100)  # doctest: +SKIP
    >>> chunks[-1].id, chunks[-1].parent_id  # doctest: +SKIP
    ('d::chunk7', 'd')
    """
    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return chunk_with(entries, recursive_splitter(size, overlap).split_text, chunk_size=size, count=count_tokens)
