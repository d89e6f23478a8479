"""Small-to-big conformal retrieval with LangChain on the real offline stack.

The 199 long documents (``local/long_documents.py``, about 670 MiniLM tokens each) go into
LangChain's own ``ParentDocumentRetriever``: chunks of at most 96 MiniLM tokens in Chroma
(MiniLM, cosine), the documents in an ``InMemoryStore``. The user path is
``calibrate_retriever(pdr, ...)`` then ``ConformalRetriever(retriever=pdr, ...)``, which returns
parent documents with the chunks that scored them.

Statistics: every question queries the chunk store once (pool of 50 chunks) and gets its
parent-level pool exactly as ``ConformalRetriever`` builds it (``ParentHost.candidates``); the
random splits are then arithmetic on those observations.

* Coverage over ``TRIALS`` seeded 50/50 splits at alpha = 0.1 (``relative`` family, the default):
  mean test coverage >= 1 - alpha - tol, tol = Z * max(sd_theory, sample sd) / sqrt(TRIALS), with
  sd_theory the BetaBinomial(n_test, k, n_cal + 1 - k) / n_test sd of one trial (``coverage_sd``; see
  ``test_retrieval_trials.py``). Negative control: the same threshold applied to the parents scored
  with the other aggregation (``sum``; the mismatch the fingerprint refuses) fails the same bound.
* Deterministic: the exact expected coverage over all splits (hypergeometric, ``similarity``
  family, tie-free) is >= 1 - alpha for the library's rank and < 1 - alpha for the rank one lower.
* Size: the conformal parent set stays under ``SIZE_LIMIT`` parents on average, which the
  keep-every-parent-in-the-pool rule fails (while it covers).
"""

from __future__ import annotations

import asyncio
import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, FingerprintMismatchError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.retrieval_scores import keep_mask
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import ServingOptions

from ..dropin_checks import coverage_sd

pytest.importorskip("langchain_classic")
pytestmark = [pytest.mark.integration]

SEED = 1313
N_CAL = 300
ALPHA = 0.1
TRIALS = 400
Z = 3.0
POOL = 50
#: Mean parents per query the conformal set must stay under at alpha = 0.1 (it is about 1.5).
SIZE_LIMIT = 3.0
N_QUERY = 80


@pytest.fixture(scope="module")
def pdr(long_documents, chroma_memory_client):
    """LangChain's ParentDocumentRetriever: 96-token chunks in Chroma, the documents in an InMemoryStore."""
    from conformal_rag_plugins.local.langchain_parents import build_parent_document_retriever

    return build_parent_document_retriever(long_documents[0], chunk_size=96, client=chroma_memory_client)


@pytest.fixture(scope="module")
def split(long_documents):
    perm = np.random.default_rng(SEED).permutation(len(long_documents[1]))
    return perm[:N_CAL], perm[N_CAL:]


@pytest.fixture(scope="module")
def parent_cal(pdr, long_documents, split):
    """The user path: ``calibrate_retriever`` on the ParentDocumentRetriever, 300 questions, gold = document ids."""
    from conformal_rag_plugins.langchain import calibrate_retriever

    questions = long_documents[1]
    return calibrate_retriever(
        pdr,
        [questions[i] for i in split[0]],
        confidence_level=1 - ALPHA,
        options=RetrievalOptions(progress=False),
    )


@pytest.fixture(scope="module")
def observations(pdr, long_documents):
    """{"max"|"sum": parent-level observations of all 705 questions}, from one chunk query each."""
    from conformal_rag_plugins.langchain.host import fetch_pairs, pool_from_pairs
    from conformal_rag_plugins.langchain.parent_retrieval import parent_host
    from conformal_rag_plugins.retrieval.gold_matching import gold_positions

    hosts = {how: parent_host(pdr, how=how) for how in ("max", "sum")}
    out: dict[str, list[PoolObservation]] = {how: [] for how in hosts}
    for q in long_documents[1]:
        pool, docs = pool_from_pairs(fetch_pairs(pdr.vectorstore, q.question, POOL))
        for how, host in hosts.items():
            cands = host.candidates(pool, docs)[0].pool
            out[how].append(PoolObservation(cands.scores, gold_positions(q, cands.ids, cands.texts)))
    return out


def _gold_chunk(pdr, parent_id: str) -> str:
    """One chunk id of a parent, from the chunk store."""
    got = pdr.vectorstore._collection.get(where={"doc_id": parent_id}, include=[])
    return sorted(got["ids"])[0]


def test_parent_document_retriever_returns_parent_copies_with_their_chunks(
    pdr, parent_cal, long_documents, split, observations
) -> None:
    """Held-out queries through ConformalRetriever: parent copies with their chunks, the set the observations give."""
    from conformal_rag_plugins.langchain import ConformalRetriever

    assert parent_cal.fingerprint_.retriever == "dense>parent:max"
    assert parent_cal.pool_size_ == POOL and parent_cal.n_calibration_ == N_CAL and parent_cal.n_misses_ == 0
    retriever = ConformalRetriever(retriever=pdr, calibration=parent_cal)
    questions = long_documents[1]
    sizes = []
    for i in split[1][:N_QUERY]:
        docs = retriever.invoke(questions[i].question)
        obs = observations["max"][i]
        kept = keep_mask("relative", obs.scores, parent_cal.threshold_)
        assert [d.metadata["score"] for d in docs] == pytest.approx(obs.scores[kept].tolist())
        sizes.append(len(docs))
        for doc in docs:
            stored = pdr.docstore.mget([doc.id])[0]
            assert doc.page_content == stored.page_content and doc is not stored
            assert "conformal_chunks" not in stored.metadata and "score" not in stored.metadata
            chunks = doc.metadata["conformal_chunks"]
            assert chunks and [c["score"] for c in chunks] == sorted((c["score"] for c in chunks), reverse=True)
            assert doc.metadata["score"] == pytest.approx(chunks[0]["score"])  # max aggregation
            assert all(c["text"] in stored.page_content for c in chunks)
            assert {d.metadata["doc_id"] for d in pdr.vectorstore.get_by_ids([c["id"] for c in chunks])} == {doc.id}
            assert doc.metadata["conformal_threshold"] == parent_cal.threshold_
    assert 1.0 <= np.mean(sizes) <= SIZE_LIMIT


def test_parent_level_coverage_over_seeded_splits_and_negative_control(observations) -> None:
    """Mean held-out coverage >= 1 - alpha - tol; the threshold applied to sum-scored parents fails it."""
    r_max = np.array([o.score("relative") for o in observations["max"]])
    r_sum = np.array([o.score("relative") for o in observations["sum"]])
    n = r_max.size
    n_cal = n // 2
    rng = np.random.default_rng(SEED)
    cov, wrong = [], []
    for _ in range(TRIALS):
        perm = rng.permutation(n)
        q = conformal_quantile(r_max[perm[:n_cal]], ALPHA)
        cov.append(float(np.mean(r_max[perm[n_cal:]] <= q)))
        wrong.append(float(np.mean(r_sum[perm[n_cal:]] <= q)))
    k = int(conformal_quantile(np.arange(n_cal, dtype=float), ALPHA)) + 1
    sd = coverage_sd(k, n_cal, n - n_cal)
    tol = Z * max(sd, float(np.std(cov, ddof=1))) / math.sqrt(TRIALS)
    assert tol < 0.01, tol
    assert np.mean(cov) >= 1 - ALPHA - tol, (np.mean(cov), tol)
    tol_wrong = Z * max(sd, float(np.std(wrong, ddof=1))) / math.sqrt(TRIALS)
    assert np.mean(wrong) < 1 - ALPHA - tol_wrong, np.mean(wrong)


def test_exact_expectation_separates_ceil_from_floor_at_parent_level(observations) -> None:
    """Over all splits: the library's rank covers in expectation, one rank lower does not (tie-free family)."""
    stats = pytest.importorskip("scipy.stats")
    scores = np.array([o.score("similarity") for o in observations["max"]])
    assert np.isfinite(scores).all() and np.unique(scores).size > 0.99 * scores.size
    n = scores.size
    n_cal = n // 2
    k = int(conformal_quantile(np.arange(n_cal, dtype=float), ALPHA)) + 1
    below = np.searchsorted(np.sort(scores), scores - 1e-12, side="left")

    def expected(rank: int) -> float:
        return float(stats.hypergeom.cdf(rank - 1, n - 1, below, n_cal).mean())

    assert 1 - ALPHA <= expected(k) <= 1 - ALPHA + 1 / (n_cal + 1) + 1e-3, expected(k)
    assert expected(k - 1) < 1 - ALPHA, expected(k - 1)


def test_parent_set_size_check_fails_keep_everything(parent_cal, observations, split) -> None:
    """Held-out with the calibrated threshold: small sets that cover; every parent in the pool covers but is large."""
    held = [observations["max"][i] for i in split[1]]
    kept = [o.covered_and_size("relative", parent_cal.threshold_) for o in held]
    coverage, size = np.mean([c for c, _ in kept]), np.mean([s for _, s in kept])
    n_test = len(held)
    k = math.ceil((N_CAL + 1) * (1 - ALPHA))
    assert coverage >= 1 - ALPHA - Z * coverage_sd(k, N_CAL, n_test), coverage
    assert size <= SIZE_LIMIT, size
    everything = [o.covered_and_size("relative", math.inf) for o in held]
    assert np.mean([c for c, _ in everything]) == 1.0
    assert np.mean([s for _, s in everything]) > SIZE_LIMIT


def test_multi_vector_retriever_and_store_with_parents_share_the_calibration(
    pdr, parent_cal, long_documents, split, tmp_path
) -> None:
    """A MultiVectorRetriever and a plain store with parents= take the PDR calibration and return the same parents;
    chunk gold ids are lifted to their parents."""
    from langchain_classic.retrievers import MultiVectorRetriever

    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever
    from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

    mvr = MultiVectorRetriever(vectorstore=pdr.vectorstore, docstore=pdr.docstore)
    hosts = [
        ConformalRetriever(retriever=pdr, calibration=parent_cal),
        ConformalRetriever(retriever=mvr, calibration=parent_cal),
        ConformalRetriever(vectorstore=pdr.vectorstore, parents=pdr.docstore, calibration=parent_cal),
    ]
    questions = long_documents[1]
    for i in split[1][:10]:
        got = [[(d.id, d.metadata["score"]) for d in r.invoke(questions[i].question)] for r in hosts]
        assert got[0] == got[1] == got[2]
    subset = [questions[i] for i in split[0][:40]]
    by_chunk = [CalibrationExample(q.question, gold_ids=(_gold_chunk(pdr, q.gold_ids[0]),)) for q in subset]
    a = calibrate_retriever(mvr, subset, options=RetrievalOptions(progress=False))
    b = calibrate_retriever(mvr, by_chunk, options=RetrievalOptions(progress=False))
    assert a.scores_ == b.scores_ and a.fingerprint_ == parent_cal.fingerprint_
    # the MultiVectorRetriever's search filter is honoured; a saved parent-level calibration loads and works
    target = questions[split[1][0]].gold_ids[0]
    only = MultiVectorRetriever(
        vectorstore=pdr.vectorstore, docstore=pdr.docstore, search_kwargs={"filter": {"doc_id": target}}
    )
    path = tmp_path / "parent_cal.json"
    parent_cal.save(path)
    loaded = RetrievalCalibration.load(path)
    assert loaded.fingerprint_.retriever == "dense>parent:max"
    docs = ConformalRetriever(retriever=only, calibration=loaded).invoke(questions[split[1][1]].question)
    assert [d.id for d in docs] == [target]


def test_scored_fusion_host_with_parents_and_callbacks(pdr, long_documents, split) -> None:
    """A ScoredFusionRetriever (dense + BM25 over the chunks) with parents=: BM25-only chunks find their parent
    through the store, and the host's run is a child of the ConformalRetriever's run."""
    from langchain_core.callbacks import BaseCallbackHandler

    from conformal_rag_plugins.langchain import ConformalRetriever, ScoredFusionRetriever, calibrate_retriever

    got = pdr.vectorstore._collection.get(include=["documents"])
    fusion = ScoredFusionRetriever.from_vectorstore(pdr.vectorstore, got["ids"], got["documents"], k=POOL)
    questions = long_documents[1]
    cal = calibrate_retriever(
        fusion,
        [questions[i] for i in split[0][:40]],
        parents=pdr.docstore,
        options=RetrievalOptions(progress=False),
    )
    assert cal.fingerprint_.retriever.startswith("hybrid(") and cal.fingerprint_.retriever.endswith(">parent:max")

    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.parents: dict[str, object] = {}

        def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kwargs) -> None:
            self.parents[str(run_id)] = parent_run_id

    runs = Runs()
    retriever = ConformalRetriever(retriever=fusion, parents=pdr.docstore, calibration=cal)
    docs = retriever.invoke(questions[split[1][0]].question, config={"callbacks": [runs]})
    assert docs and all(pdr.docstore.mget([d.id])[0] is not None for d in docs)
    assert len(runs.parents) == 2 and sum(p is None for p in runs.parents.values()) == 1
    with pytest.raises(FingerprintMismatchError):
        ConformalRetriever(retriever=fusion, calibration=cal)  # parent-level calibration without parents


def test_async_returns_what_sync_returns(pdr, parent_cal, long_documents, split) -> None:
    from conformal_rag_plugins.langchain import ConformalRetriever

    retriever = ConformalRetriever(retriever=pdr, calibration=parent_cal)
    questions = [long_documents[1][i].question for i in split[1][:5]]

    async def run() -> list:
        return await asyncio.gather(*(retriever.ainvoke(q) for q in questions))

    for sync, got in zip((retriever.invoke(q) for q in questions), asyncio.run(run()), strict=True):
        assert [(d.id, d.metadata) for d in sync] == [(d.id, d.metadata) for d in got]


def test_bad_input_gets_a_clear_error(pdr, parent_cal, long_documents, split) -> None:
    from langchain_classic.retrievers import MultiVectorRetriever

    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    question = long_documents[1][split[1][0]].question
    store = pdr.vectorstore
    # a chunk without a parent: the chunks do not carry this metadata key
    orphan = ConformalRetriever(vectorstore=store, parents=pdr.docstore, id_key="parent", calibration=parent_cal)
    with pytest.raises(ConformalError, match="has no parent"):
        orphan.invoke(question)
    # a parent missing from the store, at query time and at calibration
    with pytest.raises(CalibrationError, match="not in the store"):
        ConformalRetriever(vectorstore=store, parents={}, calibration=parent_cal).invoke(question)
    with pytest.raises(CalibrationError, match=r"neither as chunk ids nor as document ids.*or parent ids"):
        calibrate_retriever(store, long_documents[1][:20], parents={}, options=RetrievalOptions(progress=False))
    # chunk-level and parent-level calibrations refuse each other; max refuses sum
    subset = [long_documents[1][i] for i in split[0][:20]]
    chunk_examples = [CalibrationExample(q.question, gold_ids=(_gold_chunk(pdr, q.gold_ids[0]),)) for q in subset]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunk_cal = calibrate_retriever(store, chunk_examples, options=RetrievalOptions(progress=False))
    with pytest.raises(FingerprintMismatchError):
        ConformalRetriever(retriever=pdr, calibration=chunk_cal)
    with pytest.raises(FingerprintMismatchError):
        ConformalRetriever(vectorstore=store, calibration=parent_cal)
    with pytest.raises(FingerprintMismatchError):
        ConformalRetriever(retriever=pdr, parent_aggregation="sum", calibration=parent_cal)
    # options that make no sense
    with pytest.raises(ConformalError, match="BaseStore"):
        ConformalRetriever(vectorstore=store, parents=42, calibration=parent_cal)
    with pytest.raises(ConformalError, match="parent aggregation"):
        ConformalRetriever(retriever=pdr, parent_aggregation="mean", calibration=parent_cal)
    with pytest.raises(ConformalError, match="need parents"):
        ConformalRetriever(vectorstore=store, id_key="doc_id", calibration=chunk_cal)
    small_k = MultiVectorRetriever(vectorstore=store, docstore=pdr.docstore, search_kwargs={"k": 10})
    with pytest.raises(ConformalError, match="k=10"):
        ConformalRetriever(retriever=small_k, calibration=parent_cal)


def test_the_drift_monitor_reference_is_built_at_parent_level(
    pdr, parent_cal, long_documents, split, observations
) -> None:
    """``pool_scores`` gives the parent scores the monitor sees; chunk score lists are refused for this calibration.

    Negative control: set sizes taken on the chunk scores (what a reference of ``host`` scores gives)
    are another statistic than the parent set sizes the retriever feeds the monitor.
    """
    from conformal_rag_plugins.langchain import ConformalRetriever
    from conformal_rag_plugins.monitor.monitor import ConformalMonitor

    questions = long_documents[1]
    plain = ConformalRetriever(retriever=pdr, calibration=parent_cal)
    ref = [plain.pool_scores(questions[i].question) for i in split[0][:40]]
    assert {r.unit for r in ref} == {"parent:max"}
    for r, i in zip(ref, split[0][:40], strict=True):
        assert list(r.scores) == pytest.approx(observations["max"][i].scores.tolist())
    monitor = ConformalMonitor.from_observations(parent_cal, ref, statistic="set_size", delta=0.01)
    retriever = ConformalRetriever(retriever=pdr, calibration=parent_cal, options=ServingOptions(monitor=monitor))
    for i in split[1][:10]:
        docs = retriever.invoke(questions[i].question)
        assert monitor.stream[-1] == len(docs)
    chunks = [
        [s for _, s in pdr.vectorstore.similarity_search_with_relevance_scores(questions[i].question, k=POOL)]
        for i in split[0][:40]
    ]
    with pytest.raises(ConformalError, match="parent-level"):
        ConformalMonitor.from_observations(parent_cal, chunks, statistic="set_size")
    chunk_sizes = [int(keep_mask("relative", sorted(c, reverse=True), parent_cal.threshold_).sum()) for c in chunks]
    # max aggregation: a kept parent has a kept chunk, so chunks never count fewer, and often more
    assert all(c >= p for c, p in zip(chunk_sizes, monitor.reference, strict=True))
    assert sum(c > p for c, p in zip(chunk_sizes, monitor.reference, strict=True)) >= 3, chunk_sizes
