"""Small-to-big retrieval in LlamaIndex: retrieve chunks, calibrate and return their parents.

A chunk's parent is, first found: an ``IndexNode``'s ``index_id`` (``RecursiveRetriever``), the
``PARENT`` relationship (``HierarchicalNodeParser``, ``AutoMergingRetriever``), the ``SOURCE``
relationship (the document), ``metadata["parent_id"]`` (this library's ``nodes_from_entries``).
Parents come from a docstore, ``StorageContext``, mapping or list of nodes, or the host's own
(``AutoMergingRetriever``: its docstore; ``RecursiveRetriever``: its ``node_dict``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import BaseNode, IndexNode, MetadataMode, NodeWithScore

from ..core.errors import CalibrationError, ConformalError
from ..datasets.examples import CalibrationExample
from ..labelling.chunk_labels import answer_in_text
from ..retrieval.calibrated_unit import check_unit
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.parent_pools import (
    ParentCandidates,
    check_parent_aggregation,
    lift_gold_to_parents,
    parent_fingerprint,
    to_parent_pool,
)
from ..retrieval.pool_calibration import CandidatePool, check_gold_ids
from ..retrieval.serving import CHUNKS_METADATA_KEY
from .fingerprint import fingerprint_of
from .host import DOCUMENT_KEY, _index_of, existing_ids, pool_from_nodes
from .node_selection import hidden_copy


def chunk_parent_id(node: BaseNode) -> str | None:
    """The id of a chunk node's parent (see the module docstring for the order), or ``None``.

    Examples
    --------
    >>> from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    >>> leaf = TextNode(id_="c1", text="x", relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc")})
    >>> chunk_parent_id(leaf), chunk_parent_id(IndexNode(id_="c2", text="x", index_id="big"))
    ('doc', 'big')
    >>> chunk_parent_id(TextNode(id_="c3", text="x")) is None
    True
    """
    if isinstance(node, IndexNode) and node.index_id:
        return str(node.index_id)
    for related in (node.parent_node, node.source_node):
        if related is not None and related.node_id and related.node_id != node.node_id:
            return str(related.node_id)
    parent = node.metadata.get("parent_id") if node.metadata else None
    return str(parent) if parent else None


def _store_lookup(parents: Any) -> tuple[Callable[[str], BaseNode | None], Callable[[], list[BaseNode]] | None]:
    """``(get(id) -> node or None, all() -> nodes or None)`` for a docstore, storage context, mapping or list."""
    store = getattr(parents, "docstore", parents)  # a StorageContext holds its docstore
    if hasattr(store, "get_document") and hasattr(store, "document_exists"):

        def get(pid: str) -> BaseNode | None:
            return store.get_document(pid, raise_error=False)

        docs = getattr(store, "docs", None)
        return get, (lambda: list(store.docs.values())) if docs is not None else None
    if isinstance(parents, Mapping):
        bad = [k for k, v in islice(parents.items(), 50) if not isinstance(v, BaseNode)]
        if bad:
            raise ConformalError(f"parents must map ids to LlamaIndex nodes or documents; {bad[0]!r} does not.")
        return parents.get, lambda: list(parents.values())
    if isinstance(parents, Sequence) and not isinstance(parents, str):
        if not all(isinstance(n, BaseNode) for n in parents):
            raise ConformalError("parents must be LlamaIndex nodes or documents (TextNode, Document).")
        table = {n.node_id: n for n in parents}
        return table.get, lambda: list(table.values())
    raise ConformalError(
        "parents must be a LlamaIndex docstore, a StorageContext, a mapping id -> node, or a list of nodes; "
        f"got {type(parents).__name__}."
    )


def _host_parts(host: Any) -> tuple[Any, Any]:
    """``(chunk retriever, parents)`` of an ``AutoMergingRetriever`` / ``RecursiveRetriever``, else ``(host, None)``."""
    kind = type(host).__name__
    if kind == "AutoMergingRetriever":
        return host._vector_retriever, host._storage_context.docstore
    if kind == "RecursiveRetriever":
        return host._retriever_dict[host._root_id], host._node_dict or None
    return host, None


@dataclass(frozen=True)
class ParentLevel:
    """A chunk retriever (what the user passed, or the host's vector/root retriever) and its parent store.

    ``get``: parent id -> node or ``None``; ``every_parent``: all stored nodes (to map document ids to
    hierarchical parents), when the store can list them; ``how``: "max" or "sum".
    """

    retriever: Any
    how: str
    get: Callable[[str], BaseNode | None]
    every_parent: Callable[[], list[BaseNode]] | None = None

    def fingerprint(self, chunk_retriever: BaseRetriever) -> Fingerprint:
        """The parent-level fingerprint of the (resolved) chunk retriever."""
        return parent_fingerprint(fingerprint_of(chunk_retriever), self.how)

    def _text(self, pid: str) -> str | None:
        """The stored parent's text, ``None`` when the store does not hold it."""
        node = self.get(pid)
        return None if node is None else node.get_content(metadata_mode=MetadataMode.NONE)

    def candidates(self, nodes: Sequence[NodeWithScore]) -> tuple[ParentCandidates, CandidatePool]:
        """Parent-level pool of one query's chunk nodes, and the chunk pool it was made from."""
        chunks, ordered = pool_from_nodes(nodes)
        parent_of = {n.node.node_id: chunk_parent_id(n.node) for n in ordered}
        return to_parent_pool(chunks, parent_of, self._text, how=self.how), chunks

    def parent_pool(self, nodes: Sequence[NodeWithScore]) -> CandidatePool:
        """The parent-level candidate pool of one query (what calibration scores)."""
        return self.candidates(nodes)[0].pool

    def parent_nodes(self, nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
        """Copies of the parents, best first, scored from their chunks, with ``conformal_chunks``.

        ``conformal_chunks`` is hidden from the LLM and the embedding model; the store's nodes are never modified.
        """
        found, chunks = self.candidates(nodes)
        out = []
        for pid, score, listed in zip(found.pool.ids, found.pool.scores, found.chunk_lists(chunks), strict=True):
            parent = self.get(str(pid))
            assert parent is not None  # to_parent_pool raised for a parent missing from the store
            copy = hidden_copy(parent, dict(parent.metadata) | {CHUNKS_METADATA_KEY: listed}, (CHUNKS_METADATA_KEY,))
            out.append(NodeWithScore(node=copy, score=float(score)))
        return out

    def lift_gold(
        self, examples: Sequence[CalibrationExample], chunk_retriever: BaseRetriever
    ) -> list[CalibrationExample]:
        """Gold ids as parent ids; an id found nowhere raises :class:`CalibrationError`.

        A chunk id becomes its parent's, a parent id stays, and a node above the parent level (a
        ``HierarchicalNodeParser`` root) or a document id (the parents' ``SOURCE``) becomes the parents under it.
        """
        gold = sorted({g for ex in examples for g in ex.gold_ids})
        if not gold:
            return list(examples)
        in_index = existing_ids(chunk_retriever, gold) or set()
        chunk_nodes = _nodes_by_id(chunk_retriever, sorted(in_index), self.get)
        parent_of: dict[str, str | None] = {}
        for gid, node in chunk_nodes.items():
            parent_of[gid] = chunk_parent_id(node)
            if parent_of[gid] is None:
                raise CalibrationError(
                    f"Gold chunk {gid!r} has no parent (no IndexNode index_id, PARENT or SOURCE relationship)."
                )
        expand: dict[str, list[str]] = {}
        for gid in gold:
            if gid not in parent_of and (node := self.get(gid)) is not None:
                expand[gid] = self._parent_level_ids(node)
        unresolved = [g for g in gold if g not in parent_of and g not in expand]
        by_source = self._parents_by_source() if unresolved else {}
        expand |= {g: by_source[g] for g in unresolved if g in by_source}
        check_gold_ids(examples, set(parent_of) | set(expand), document_key=DOCUMENT_KEY, also="parent ids (parents=)")
        if not any(len(under) > 1 for under in expand.values()):
            return lift_gold_to_parents(examples, parent_of, expand)
        # the one gold-id rule at parent level: a document with answers= -> its parents holding an answer
        return [lift_gold_to_parents([ex], parent_of, self._answering(ex, expand))[0] for ex in examples]

    def _answering(self, example: CalibrationExample, expand: dict[str, list[str]]) -> dict[str, list[str]]:
        """``expand`` for one example: of several parents under an id, those containing an answer (all if none)."""
        if not example.answers:
            return expand
        out = dict(expand)
        for gid in example.gold_ids:
            under = expand.get(gid, ())
            if len(under) > 1:
                out[gid] = [p for p in under if answer_in_text(example.answers, self._text(p) or "")] or list(under)
        return out

    def _children(self, node: BaseNode) -> list[BaseNode]:
        """The stored children of ``node``."""
        return [c for info in node.child_nodes or [] if (c := self.get(info.node_id)) is not None]

    def _parent_level_ids(self, node: BaseNode) -> list[str]:
        """``[node id]`` for a parent; for a node above the parent level, the parents under it."""
        children = self._children(node)
        if not children or not children[0].child_nodes:
            return [node.node_id]
        return [p for child in children for p in self._parent_level_ids(child)]

    def _parents_by_source(self) -> dict[str, list[str]]:
        """Document id -> ids of the parents cut from it (nodes whose children are leaves)."""
        if self.every_parent is None:
            return {}
        out: dict[str, list[str]] = {}
        for node in self.every_parent():
            children = node.child_nodes or []
            first = self.get(children[0].node_id) if children else None
            if first is None or first.child_nodes or node.source_node is None:
                continue
            out.setdefault(node.source_node.node_id, []).append(node.node_id)
        return out


def _nodes_by_id(
    retriever: BaseRetriever, ids: Sequence[str], fallback: Callable[[str], BaseNode | None]
) -> dict[str, BaseNode]:
    """Chunk nodes (with their relationships) from the host's vector store or index docstore, else the parent store."""
    if not ids:
        return {}
    index = _index_of(retriever)
    try:
        nodes = index.vector_store.get_nodes(node_ids=list(ids)) if index is not None else []
    except (NotImplementedError, AttributeError, ValueError):
        nodes = []
    found = {n.node_id: n for n in nodes}
    docstore = getattr(index, "docstore", None)
    for i in ids:
        if i in found:
            continue
        node = docstore.get_node(i, raise_error=False) if docstore is not None else None
        if (node := node or fallback(i)) is not None:
            found[i] = node
    return found


def resolve_parent_level(host: Any, parents: Any = None, how: str = "max") -> ParentLevel | None:
    """The parent level of a host, or ``None`` for plain chunk-level retrieval.

    On when ``parents`` is given or the host is an ``AutoMergingRetriever`` or ``RecursiveRetriever``.

    Examples
    --------
    >>> from llama_index.core.schema import TextNode
    >>> resolve_parent_level(object()) is None, resolve_parent_level(object(), [TextNode(id_="d", text="x")], "sum").how
    (True, 'sum')
    """
    check_parent_aggregation(how)
    chunk_host, own = _host_parts(host)
    store = parents if parents is not None else own
    if store is None:
        if how != "max":
            raise ConformalError(f"parent_aggregation={how!r} needs parents=...: the docstore holding the parents.")
        if chunk_host is not host:
            raise ConformalError(
                f"The {type(host).__name__} has no parent nodes to return (empty node_dict); pass parents=..."
            )
        return None
    get, every = _store_lookup(store)
    return ParentLevel(chunk_host, how, get, every)


def check_level(calibration: Any, level: ParentLevel | None) -> None:
    """Refuse a parent-level calibration used at chunk level and the other way round, in plain words."""
    give = "parents=... (the docstore) or the AutoMergingRetriever / RecursiveRetriever host"
    check_unit(calibration, level is not None, give_parents=give)
