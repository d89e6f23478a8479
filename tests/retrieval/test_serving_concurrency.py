"""32 concurrent queries through each framework's ``ConformalRetriever`` return the same sets as
sequential queries (threads and asyncio), with no deadlock: every run is bounded in time.

The hosts are in-memory vector stores over the bundled corpus with a deterministic hashed
bag-of-words embedding (no model): this tests control flow, not retrieval quality.
"""

from __future__ import annotations

import asyncio
import re
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

import numpy as np
import pytest

from conformal_rag_plugins.retrieval.options import RetrievalOptions

pytestmark = pytest.mark.integration

T = TypeVar("T")
DIM = 2048
POOL = 20
N_QUERIES = 32
CONFIDENCE = 0.6
TIMEOUT = 60.0  # seconds per concurrent run; a deadlock fails the test instead of hanging it
_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    _TOKEN.findall(
        "the a an of in on at to and or is was were are be by for with as that this what which who whom whose when "
        "where why how did does do from it its their his her into than then there these those has have had not no"
    )
)


def hashed_embedding(text: str) -> list[float]:
    """A normalised bag of hashed words without stop words (stable across processes, unlike ``hash``)."""
    vec = np.zeros(DIM)
    for token in _TOKEN.findall(text.lower()):
        if token in _STOP:
            continue
        vec[zlib.crc32(token.encode("utf-8")) % DIM] += 1.0
    norm = float(np.linalg.norm(vec))
    return (vec / norm if norm else vec).tolist()


def bounded(fn: Callable[[], T], timeout: float = TIMEOUT) -> T:
    """``fn()`` in a daemon thread; fail (never hang) if it takes longer than ``timeout``."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised in the test thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"no result within {timeout} s: deadlock?"
    if "error" in out:
        raise out["error"]
    return out["value"]


def threaded(query: Callable[[str], T], questions: Sequence[str]) -> list[T]:
    """Each question on a pool of 8 threads, all bounded by :data:`TIMEOUT`."""
    pool = ThreadPoolExecutor(8)
    try:
        futures = [pool.submit(query, q) for q in questions]
        _, not_done = wait(futures, timeout=TIMEOUT)
        assert not not_done, f"{len(not_done)} queries unfinished after {TIMEOUT} s: deadlock?"
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture(scope="module")
def split(squad_questions) -> tuple[list, list[str]]:
    """150 calibration examples and 32 other questions."""
    return list(squad_questions[:150]), [e.question for e in squad_questions[400 : 400 + N_QUERIES]]


def test_llamaindex_concurrent_queries_match_sequential(squad_entries, split) -> None:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.schema import TextNode

    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

    class HashedEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return hashed_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return hashed_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return hashed_embedding(text)

    nodes = [TextNode(id_=e.id, text=e.text) for e in squad_entries]
    index = VectorStoreIndex(nodes, embed_model=HashedEmbedding(model_name="hashed"))
    examples, questions = split
    cal = calibrate_retriever(
        index,
        examples,
        confidence_level=CONFIDENCE,
        pool_size=POOL,
        options=RetrievalOptions(progress=False),
    )
    retriever = ConformalRetriever(cal, index=index)

    def ids(nodes: Sequence[Any]) -> list[str]:
        return [n.node.node_id for n in nodes]

    sequential = [ids(retriever.retrieve(q)) for q in questions]
    assert len({len(s) for s in sequential}) > 1  # the sets differ in size: a real test of the threshold
    assert threaded(lambda q: ids(retriever.retrieve(q)), questions) == sequential

    async def gathered() -> list[list[str]]:
        results = await asyncio.wait_for(asyncio.gather(*(retriever.aretrieve(q) for q in questions)), TIMEOUT)
        return [ids(r) for r in results]

    assert bounded(lambda: asyncio.run(gathered())) == sequential


def test_langchain_concurrent_queries_match_sequential(squad_entries, split) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    class HashedEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hashed_embedding(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return hashed_embedding(text)

    class ScoredStore(InMemoryVectorStore):
        def _select_relevance_score_fn(self) -> Callable[[float], float]:
            return lambda cosine: (1.0 + cosine) / 2.0

    store = ScoredStore(HashedEmbeddings())
    store.add_documents(
        [Document(page_content=e.text, id=e.id) for e in squad_entries], ids=[e.id for e in squad_entries]
    )
    examples, questions = split
    cal = calibrate_retriever(
        store,
        examples,
        confidence_level=CONFIDENCE,
        pool_size=POOL,
        options=RetrievalOptions(progress=False),
    )
    retriever = ConformalRetriever(vectorstore=store, calibration=cal)

    def ids(docs: Sequence[Any]) -> list[str]:
        return [d.id for d in docs]

    sequential = [ids(retriever.invoke(q)) for q in questions]
    assert len({len(s) for s in sequential}) > 1
    assert threaded(lambda q: ids(retriever.invoke(q)), questions) == sequential
    assert bounded(lambda: [ids(r) for r in retriever.batch(questions, config={"max_concurrency": 8})]) == sequential

    async def batched() -> list[list[str]]:
        results = await asyncio.wait_for(retriever.abatch(questions, config={"max_concurrency": 8}), TIMEOUT)
        return [ids(r) for r in results]

    async def gathered() -> list[list[str]]:
        results = await asyncio.wait_for(asyncio.gather(*(retriever.ainvoke(q) for q in questions)), TIMEOUT)
        return [ids(r) for r in results]

    assert bounded(lambda: asyncio.run(batched())) == sequential
    assert bounded(lambda: asyncio.run(gathered())) == sequential
