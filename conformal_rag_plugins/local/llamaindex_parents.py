"""A small-to-big LlamaIndex stack over long documents: MiniLM-sized chunks in Chroma, parents in a docstore.

``flat``: ``SentenceSplitter`` chunks with a ``SOURCE`` relationship; the docstore holds the
documents. ``hierarchical``: ``HierarchicalNodeParser`` with two levels, as
``AutoMergingRetriever`` expects (``PARENT`` relationships; the docstore holds every node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import BaseNode

from ..datasets.examples import CorpusEntry
from .chroma import open_collection
from .llamaindex_models import sentence_splitter
from .llamaindex_stack import index_nodes

#: The two layouts :func:`build_parent_stack` builds.
LAYOUTS = ("flat", "hierarchical")

#: Chunk size (MiniLM tokens) of the parent level of the hierarchical layout: a whole long document.
PARENT_LEVEL_CHUNK_SIZE = 4096


@dataclass(frozen=True)
class ParentStack:
    """The pieces of a small-to-big stack.

    ``index`` holds the chunks (leaves) in a cosine Chroma collection; ``storage_context.docstore``
    holds the parents (hierarchical: every node); ``parents`` maps parent id -> node.
    """

    index: VectorStoreIndex
    chunks: list[BaseNode]
    storage_context: StorageContext
    parents: dict[str, BaseNode]


def _part_id(i: int, doc: BaseNode) -> str:
    return f"{doc.node_id}#part{i}"


def _split(documents: list[Document], layout: str, chunk_size: int) -> tuple[list[BaseNode], list[BaseNode]]:
    """(chunks, parents) of the documents; chunk ids ``doc::chunk{i}`` (hierarchical: ``doc#part{j}::chunk{i}``)."""
    leaf = sentence_splitter(chunk_size)  # stable ids: f"{doc_id}::chunk{i}"
    if layout == "flat":
        return list(leaf.get_nodes_from_documents(documents)), list(documents)
    from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes, get_root_nodes

    top = sentence_splitter(PARENT_LEVEL_CHUNK_SIZE, 0)
    top.id_func = _part_id
    parser = HierarchicalNodeParser.from_defaults(
        node_parser_ids=["parent", "chunk"], node_parser_map={"parent": top, "chunk": leaf}
    )
    nodes = parser.get_nodes_from_documents(documents)
    return get_leaf_nodes(nodes), get_root_nodes(nodes)


def build_parent_stack(
    entries: Sequence[CorpusEntry],
    *,
    layout: str = "flat",
    chunk_size: int = 96,
    client: Any = None,
    collection_name: str | None = None,
    embed_model: Any = None,
) -> ParentStack:
    """Chunk long entries, index the chunks in Chroma (reusing a collection that holds them), parents in a docstore."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    documents = [Document(id_=e.id, text=e.text, metadata={"title": e.title} if e.title else {}) for e in entries]
    chunks, parents = _split(documents, layout, chunk_size)
    _, collection = open_collection(client, collection_name or f"crp-li-parent-{layout}-{chunk_size}")
    index = index_nodes(chunks, collection, embed_model)
    context = StorageContext.from_defaults()
    context.docstore.add_documents(parents if layout == "flat" else [*parents, *chunks])
    return ParentStack(index, chunks, context, {p.node_id: p for p in parents})
