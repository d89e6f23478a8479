"""Build a LangChain ``ParentDocumentRetriever`` on the offline stack (Chroma + MiniLM), for tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..datasets.examples import CorpusEntry
from .chroma import open_collection
from .langchain_models import MiniLMEmbeddings, recursive_splitter


def build_parent_document_retriever(
    entries: Sequence[CorpusEntry],
    *,
    chunk_size: int = 96,
    chunk_overlap: int | None = None,
    client: Any = None,
    collection_name: str | None = None,
    embeddings: Any = None,
) -> Any:
    """A ``ParentDocumentRetriever``: ``chunk_size``-token chunks in Chroma, parents in an ``InMemoryStore``.

    Parents keep their ids (docstore keys, chunks' ``metadata['doc_id']``), chunks get
    ``f"{parent_id}::chunk{i}"`` (the same on every rebuild); a filled collection is reused and only the
    docstore filled. Needs ``langchain-classic``.
    """
    from langchain_chroma import Chroma
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_core.documents import Document
    from langchain_core.stores import InMemoryStore

    name = collection_name or f"crp-langchain-parents-{chunk_size}"
    client, collection = open_collection(client, name)
    store = Chroma(client=client, collection_name=name, embedding_function=embeddings or MiniLMEmbeddings())
    retriever = ParentDocumentRetriever(
        vectorstore=store, docstore=InMemoryStore(), child_splitter=recursive_splitter(chunk_size, chunk_overlap)
    )
    docs = [Document(page_content=e.text, metadata={"title": e.title or ""}, id=e.id) for e in entries]
    ids = [e.id for e in entries]
    if collection.count():
        retriever.docstore.mset(list(zip(ids, docs, strict=True)))
    else:
        retriever.add_documents(docs, ids=ids)
    return retriever
