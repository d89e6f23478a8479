"""The candidates of :func:`~.hybrid_tuning.calibrate_hybrid_retriever`: unit x fusion setting x pool size."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ..datasets.examples import CalibrationExample, CorpusEntry
from ..labelling.chunk_labels import map_gold_to_chunks
from ..labelling.chunk_records import Chunk
from ..labelling.gold_ids import GoldLookup, corpus_lookup, gold_on_chunks
from ..local.bm25 import BM25Index
from ..retrieval.fingerprint import Fingerprint
from ..retrieval.host import Parents, as_parents
from ..retrieval.pool_calibration import CandidatePool
from ..tuning.candidates import TunedCandidate
from ..tuning.fusion_config import FusionConfig
from ..tuning.unit_search import UnitSearch
from .fusion import ScoredFusionRetriever
from .fusion_fanout import FusionFanout
from .host import DOCUMENT_KEY, all_ids, doc_id, document_of, existing_ids, fetch_pool, quiet_relevance
from .parent_retrieval import DEFAULT_ID_KEY, ParentHost, parent_examples, parent_host


def corpus_ids_texts(corpus: Sequence[CorpusEntry | Document]) -> tuple[list[str], list[str]]:
    """The ids and texts of corpus entries or documents (a document needs an id).

    Examples
    --------
    >>> corpus_ids_texts([CorpusEntry("a", "text")])
    (['a'], ['text'])
    """
    ids, texts = [], []
    for item in corpus:
        if isinstance(item, Document):
            ident = doc_id(item)
            if ident is None:
                raise ValueError("Every Document needs an id (Document.id or metadata['id']) for BM25 and gold ids.")
            ids.append(ident)
            texts.append(item.page_content)
        else:
            ids.append(item.id)
            texts.append(item.text)
    return ids, texts


def _parent_id(item: CorpusEntry | Document, ident: str, id_key: str) -> str:
    if isinstance(item, Document):
        return str(item.metadata.get(id_key) or ident)
    return str(getattr(item, "parent_id", None) or ident)


def corpus_gold_lookup(store: VectorStore, corpus: Sequence[CorpusEntry | Document]) -> GoldLookup:
    """The one gold-id rule's lookup over the hybrid's corpus: its ids (and the store's), a document's chunks
    by ``metadata["doc_id"]`` (a :class:`~conformal_rag_plugins.labelling.chunk_records.Chunk`: its ``parent_id``).

    Examples
    --------
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> corpus = [Document(t, id=f"a::chunk{i}", metadata={"doc_id": "a"}) for i, t in enumerate("xy")]
    >>> lookup = corpus_gold_lookup(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)), corpus)
    >>> sorted(lookup.existing_ids(["a", "a::chunk1"])), lookup.document_chunks(["a"])
    (['a::chunk1'], {'a': [('a::chunk0', 'x'), ('a::chunk1', 'y')]})
    """
    ids, texts = corpus_ids_texts(corpus)
    docs = [_document_of(item) for item in corpus]
    triples = list(zip(ids, texts, docs, strict=True))
    return corpus_lookup(triples, lambda gold: existing_ids(store, gold), DOCUMENT_KEY)


def _document_of(item: CorpusEntry | Document) -> str | None:
    if isinstance(item, Document):
        return document_of(item.metadata)
    return item.parent_id if isinstance(item, Chunk) and item.is_split else None


@dataclass
class UnitCandidates(UnitSearch):
    """The :class:`~conformal_rag_plugins.tuning.unit_search.UnitSearch` over ``ScoredFusionRetriever`` hosts."""

    store: VectorStore | None = None
    bm25: BM25Index | None = None
    parents: Parents = field(default_factory=Parents)
    parent_texts: dict[str, str | None] = field(default_factory=dict)

    def build_host(self, fusion: FusionConfig, pool_size: int) -> ScoredFusionRetriever:
        return ScoredFusionRetriever(
            vectorstore=self.store, bm25=self.bm25, k=pool_size, weight=fusion.weight, method=fusion.method
        )

    def source(self, cand: TunedCandidate) -> ParentHost:
        spec = self.parents
        found = parent_host(self.host(cand), parents=spec.store, id_key=spec.id_key, how=self.how)
        assert found is not None
        return found

    def fetcher(self, cand: TunedCandidate) -> Callable[[str], CandidatePool]:

        def fetch(q: str) -> CandidatePool:
            with quiet_relevance():
                if cand.unit == "chunk":
                    return fetch_pool(self.host(cand), q, cand.pool_size)[0]
                return self.source(cand).fetch_pool(q, cand.pool_size)

        return fetch

    def fingerprint(self, cand: TunedCandidate) -> Fingerprint:
        return self.host(cand).conformal_fingerprint() if cand.unit == "chunk" else self.source(cand).fingerprint()

    def all_ids(self, host: Any) -> list[str] | None:
        return all_ids(host)

    def chunk_pools(self, question: str) -> Mapping[tuple[FusionConfig, int], CandidatePool]:
        """Every setting's chunk pool from one dense and one BM25 search, without the store's relevance warning."""
        with quiet_relevance():
            return super().chunk_pools(question)

    def parent_text(self, pid: str) -> str | None:
        if pid not in self.parent_texts:
            value = self.source(self.candidates[0]).lookup([pid])[pid]
            self.parent_texts[pid] = None if value is None else getattr(value, "page_content", str(value))
        return self.parent_texts[pid]


def unit_candidates(
    store: VectorStore,
    corpus: Sequence[CorpusEntry | Document],
    examples: Sequence[CalibrationExample],
    grid: Sequence[FusionConfig],
    pool_sizes: Sequence[int],
    *,
    parents: Any = None,
) -> UnitCandidates:
    """Build the candidates and put the gold on each unit (chunk or document ids; with ``parents``, parent ids too).

    Chunk-level gold follows the one rule of :func:`~conformal_rag_plugins.labelling.gold_ids.gold_on_chunks`,
    a document's chunks read from ``corpus`` (:func:`corpus_gold_lookup`).

    ``parents``: the parents' store or a :class:`~conformal_rag_plugins.retrieval.host.Parents` (its
    ``id_key`` names the chunks' parent-id key); parent-level gold from :func:`~.parent_retrieval.parent_examples`.
    """
    from ..local.tokens import count_tokens

    spec = as_parents(parents) or Parents()
    ids, texts = corpus_ids_texts(corpus)
    bm25 = BM25Index(list(ids), list(texts))
    probe = ScoredFusionRetriever(vectorstore=store, bm25=bm25, k=int(pool_sizes[0]))
    level = parent_host(probe, parents=spec.store, id_key=spec.id_key, how=spec.aggregation)
    fan = FusionFanout(store, bm25, "hybrid", grid, pool_sizes)
    own = {"store": store, "bm25": bm25, "parents": spec, "fan": fan}
    out = UnitCandidates.over(grid, pool_sizes, spec.aggregation, level is not None, count_tokens, **own)
    if level is None:
        out.unit_examples["chunk"] = gold_on_chunks(examples, corpus_gold_lookup(store, corpus))
        return out
    key = level.id_key or DEFAULT_ID_KEY
    parent_of = {i: _parent_id(item, i, key) for item, i in zip(corpus, ids, strict=True)}
    records = [Chunk(i, t, parent_id=parent_of[i]) for i, t in zip(ids, texts, strict=True)]
    out.set_parent_gold(
        parent_of,
        map_gold_to_chunks(examples, records)[0],
        lambda: parent_examples(level, examples),
        document_key=DOCUMENT_KEY,
    )
    return out
