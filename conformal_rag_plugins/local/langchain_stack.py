"""Fill a LangChain Chroma store with corpus entries on the offline stack (MiniLM embeddings).

The hybrid retriever is :func:`conformal_rag_plugins.langchain.fusion.build_hybrid_retriever`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..datasets.examples import CorpusEntry
from .chroma import add_in_batches, open_collection, stored_ids
from .langchain_models import MiniLMEmbeddings
from .tokens import silenced_truncation


def _metadata(entry: CorpusEntry) -> dict[str, str]:
    meta = {"title": entry.title or ""}
    parent = getattr(entry, "parent_id", None)
    if parent and parent != entry.id:  # a chunk of a longer entry
        meta["parent_id"] = parent
    return meta


def build_chroma_vectorstore(
    entries: Sequence[CorpusEntry],
    *,
    client: Any = None,
    collection_name: str = "conformal-rag-langchain",
    embeddings: Any = None,
    warn_truncation: bool = True,
) -> Any:
    """A ``langchain_chroma.Chroma`` store on a cosine collection, reused when already filled.

    Document ids are the entry ids (the same on every rebuild). A ``TruncationWarning`` counts entries
    past MiniLM's 254-token window; ``warn_truncation=False`` silences it where whole documents are
    indexed on purpose.
    """
    from langchain_chroma import Chroma

    client, collection = open_collection(client, collection_name)
    embeddings = embeddings or MiniLMEmbeddings()
    have = stored_ids(collection, [e.id for e in entries])
    todo = [e for e in entries if e.id not in have]
    if todo:
        with silenced_truncation(not warn_truncation):
            vectors = embeddings.embed_documents([e.text for e in todo])
        add_in_batches(
            collection,
            [e.id for e in todo],
            vectors,
            [e.text for e in todo],
            [_metadata(e) for e in todo],
        )
    return Chroma(client=client, collection_name=collection_name, embedding_function=embeddings)
