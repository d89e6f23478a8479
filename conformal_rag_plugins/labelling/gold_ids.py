"""The one gold-id rule of every ``calibrate*`` in both adapters: gold ids put on the store's chunks.

A gold id may be (1) a chunk id of the store, (2) a document id with ``answers=`` (moved onto the
chunks of the document that contain an answer) or (3) a document id without answers (all of the
document's chunks), as :func:`~.chunk_labels.map_gold_to_chunks` maps them and counts them in
``metadata["gold_rule"]``. An adapter supplies only a :class:`GoldLookup`: which ids its store
holds and the chunks of a document id (LlamaIndex: the nodes' ``ref_doc_id``; LangChain:
``metadata["doc_id"]``). Anything else raises the one error of
:func:`~conformal_rag_plugins.datasets.gold_ids.gold_ids_error`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..datasets.examples import CalibrationExample
from ..datasets.gold_ids import gold_ids_error
from .chunk_labels import map_gold_to_chunks
from .chunk_records import Chunk

#: ``document_chunks(doc_ids)`` -> document id -> ``(chunk id, text)`` pairs; ``None``: the store cannot list them.
DocumentChunks = Callable[[list[str]], Mapping[str, Sequence[tuple[str, str]]] | None]


@dataclass(frozen=True)
class GoldLookup:
    """What one framework's store says about gold ids.

    Attributes
    ----------
    existing_ids : callable
        ``existing_ids(ids)`` -> the ids the store holds as chunks, or ``None`` when it cannot tell
        (the gold is then kept as given).
    document_chunks : callable
        ``document_chunks(doc_ids)`` -> each known document's ``(chunk id, text)`` pairs (unknown
        documents left out), or ``None`` when the store cannot list a document's chunks.
    document_key : str
        How this framework finds the document of a chunk, for the error message.
    """

    existing_ids: Callable[[list[str]], set[str] | None]
    document_chunks: DocumentChunks
    document_key: str


def chunks_of_documents(
    chunks: Iterable[tuple[str, str, str | None]], doc_ids: Iterable[str]
) -> dict[str, list[tuple[str, str]]]:
    """``(chunk id, text)`` pairs per wanted document id, from ``(chunk id, text, document id)`` triples.

    >>> chunks_of_documents([("a0", "x", "a"), ("a1", "y", "a"), ("b0", "z", "b")], ["a", "c"])
    {'a': [('a0', 'x'), ('a1', 'y')]}
    """
    wanted = set(doc_ids)
    out: dict[str, list[tuple[str, str]]] = {}
    for ident, text, doc in chunks:
        if doc is not None and doc in wanted:
            out.setdefault(doc, []).append((ident, text))
    return out


def corpus_lookup(
    chunks: Sequence[tuple[str, str, str | None]],
    existing: Callable[[list[str]], set[str] | None],
    document_key: str,
) -> GoldLookup:
    """The lookup over an in-memory corpus of ``(chunk id, text, document id)`` triples; ``existing``: the store's.

    >>> lookup = corpus_lookup([("a0", "x", "a"), ("a1", "y", "a")], lambda ids: {"s"} & set(ids), "doc_id")
    >>> sorted(lookup.existing_ids(["a", "a1", "s"])), lookup.document_chunks(["a"])
    (['a1', 's'], {'a': [('a0', 'x'), ('a1', 'y')]})
    """
    own = {ident for ident, _, _ in chunks}

    def known(gold: list[str]) -> set[str]:
        return {g for g in gold if g in own} | (existing(gold) or set())

    return GoldLookup(known, lambda doc_ids: chunks_of_documents(chunks, doc_ids), document_key)


def gold_on_chunks(examples: Iterable[CalibrationExample], lookup: GoldLookup) -> list[CalibrationExample]:
    """The examples with their gold on the store's chunks (same order, same questions and digests).

    Chunk ids stay; document ids become the document's chunks holding an answer (all of its chunks
    without answers or when none holds one), with ``metadata["gold_rule"]`` and
    ``metadata["parent_gold_ids"]``. When every gold id is a chunk id the examples come back unchanged.

    Raises
    ------
    CalibrationError
        A gold id that is neither a chunk id nor a document id of the store, or document ids on a
        store that cannot list a document's chunks.

    Examples
    --------
    >>> chunks = {"d": [("d::chunk0", "Rollo led them."), ("d::chunk1", "In 911.")]}
    >>> lookup = GoldLookup(
    ...     lambda ids: {i for i in ids if i.startswith("d::")},
    ...     lambda docs: {d: chunks[d] for d in docs if d in chunks},
    ...     'metadata["doc_id"]',
    ... )
    >>> ex = CalibrationExample("When?", gold_ids=("d",), answers=("911",))
    >>> gold_on_chunks([ex], lookup)[0].gold_ids
    ('d::chunk1',)
    >>> gold_on_chunks([CalibrationExample("When?", gold_ids=("d",))], lookup)[0].gold_ids
    ('d::chunk0', 'd::chunk1')
    >>> gold_on_chunks([CalibrationExample("When?", gold_ids=("x",))], lookup)
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.CalibrationError: 1 gold id(s) are not in the store, ...
    """
    examples = list(examples)
    gold = sorted({g for ex in examples for g in ex.gold_ids})
    known = lookup.existing_ids(gold) if gold else None
    if known is None:
        return examples
    missing = [g for g in gold if g not in known]
    if not missing:
        return examples
    n_chunk_ids = len(gold) - len(missing)
    found = lookup.document_chunks(missing)
    if found is None:
        raise gold_ids_error(missing, n_chunk_ids=n_chunk_ids, document_key=lookup.document_key, documents_listed=False)
    docs = {d: list(pairs) for d, pairs in found.items() if pairs}
    unknown = [g for g in missing if g not in docs]
    if unknown:
        raise gold_ids_error(
            unknown, n_chunk_ids=n_chunk_ids, n_document_ids=len(docs), document_key=lookup.document_key
        )
    chunks = [Chunk(ident, text, parent_id=doc) for doc, pairs in docs.items() for ident, text in pairs]
    return map_gold_to_chunks(examples, chunks)[0]
