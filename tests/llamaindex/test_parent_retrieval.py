"""LlamaIndex small-to-big: chunks retrieved, parents calibrated and returned, on the real offline stack.

199 long documents (6 SQuAD paragraphs each) are cut into 96-token chunks by LlamaIndex's own
``SentenceSplitter`` (chunks point to their ``Document`` through ``SOURCE``) and by a
``HierarchicalNodeParser`` (leaves point to their parent through ``PARENT``, for an
``AutoMergingRetriever``); the chunks live in Chroma with MiniLM embeddings, the parents in a
docstore. The 705 questions are labelled with their document id.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import AutoMergingRetriever, RecursiveRetriever
from llama_index.core.schema import IndexNode, MetadataMode, TextNode

from conformal_rag_plugins.core.coverage_band import split_conformal_band
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, FingerprintMismatchError
from conformal_rag_plugins.core.quantile import conformal_quantile, flagged_rank
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.llamaindex import ConformalRetriever, MiniLMEmbedding, calibrate_retriever, fingerprint_of
from conformal_rag_plugins.llamaindex.parent_retrieval import CHUNKS_METADATA_KEY, resolve_parent_level
from conformal_rag_plugins.local.llamaindex_parents import build_parent_stack
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import collect_observations
from conformal_rag_plugins.retrieval.serving import CONFORMAL_METADATA_KEYS, ServingOptions

pytestmark = pytest.mark.integration

ALPHA = 0.1
POOL = 50
SEED = 20261124
N_CAL = 300


@pytest.fixture(scope="module")
def flat(long_documents, chroma_memory_client):
    """SentenceSplitter chunks (SOURCE -> Document) in Chroma, the Documents in a docstore."""
    return build_parent_stack(long_documents[0], layout="flat", client=chroma_memory_client)


@pytest.fixture(scope="module")
def split(long_documents):
    perm = np.random.default_rng(SEED).permutation(len(long_documents[1]))
    return [long_documents[1][i] for i in perm[:N_CAL]], [long_documents[1][i] for i in perm[N_CAL:]]


@pytest.fixture(scope="module")
def chunk_retriever(flat):
    return flat.index.as_retriever(similarity_top_k=POOL)


@pytest.fixture(scope="module")
def docstore(flat):
    return flat.storage_context.docstore


@pytest.fixture(scope="module")
def cal(chunk_retriever, docstore, split):
    return calibrate_retriever(
        chunk_retriever,
        split[0],
        confidence_level=1 - ALPHA,
        parents=docstore,
        options=RetrievalOptions(progress=False),
    )


@pytest.fixture(scope="module")
def retriever(chunk_retriever, cal, docstore):
    return ConformalRetriever(retriever=chunk_retriever, calibration=cal, parents=docstore)


@pytest.fixture(scope="module")
def parent_observations(chunk_retriever, docstore, long_documents):
    """Parent-level pools of all 705 questions, built by the same function the calibration uses."""
    level = resolve_parent_level(chunk_retriever, docstore)
    examples = level.lift_gold(long_documents[1], chunk_retriever)
    return collect_observations(examples, lambda q: level.parent_pool(chunk_retriever.retrieve(q)), progress=False)


def _ids(nodes) -> list[str]:
    return [n.node.node_id for n in nodes]


def test_calibration_is_parent_level(cal, chunk_retriever):
    assert cal.fingerprint_.retriever == fingerprint_of(chunk_retriever).retriever + ">parent:max"
    assert cal.n_calibration_ == N_CAL and cal.pool_size_ == POOL and math.isfinite(cal.threshold_)


def test_held_out_coverage_through_the_retriever(retriever, cal, split, parent_observations, docstore, long_documents):
    """The user path: held-out coverage in the exact split-conformal band, parents with their chunks,
    and every set equal to the one the numpy simulation below computes from the observations."""
    position = {id(q): i for i, q in enumerate(long_documents[1])}
    covered = []
    for q in split[1]:
        nodes = retriever.retrieve(q.question)
        covered.append(q.gold_ids[0] in _ids(nodes))
        hit, size = parent_observations[position[id(q)]].covered_and_size("relative", cal.threshold_)
        assert (hit, size) == (covered[-1], len(nodes))
        for n in nodes:
            stored = docstore.get_document(n.node.node_id)
            assert n.node is not stored and n.node.text == stored.text
            assert set(CONFORMAL_METADATA_KEYS) <= set(n.node.metadata)
            chunks = n.node.metadata[CHUNKS_METADATA_KEY]
            assert chunks and chunks[0]["score"] == pytest.approx(n.score)  # max: the best chunk's score
            assert [c["score"] for c in chunks] == sorted((c["score"] for c in chunks), reverse=True)
            assert all(c["id"].startswith(n.node.node_id + "::chunk") and c["text"] in stored.text for c in chunks)
            assert CHUNKS_METADATA_KEY not in n.node.get_content(metadata_mode=MetadataMode.LLM)
            assert n.node.get_content(metadata_mode=MetadataMode.LLM) == stored.get_content(MetadataMode.LLM)
            assert CHUNKS_METADATA_KEY not in stored.metadata
    low, _ = split_conformal_band(N_CAL, len(split[1]), ALPHA, level=0.99)
    assert np.mean(covered) >= low


def _trials(observations, n_cal: int, rank_of, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Held-out coverage and mean set size of ``trials`` seeded random splits (threshold = ``rank_of(n)``-th score)."""
    scores = np.array([o.score("relative") for o in observations])
    rng = np.random.default_rng(seed)
    cov, size = np.empty(trials), np.empty(trials)
    for t in range(trials):
        perm = rng.permutation(len(observations))
        k = rank_of(n_cal)
        q = np.sort(scores[perm[:n_cal]])[k - 1] if k <= n_cal else math.inf
        test = perm[n_cal:]
        cov[t] = np.mean(scores[test] <= q)
        size[t] = np.mean([observations[i].covered_and_size("relative", q)[1] for i in test[:100]])
    return cov, size


def _tolerance(n_cal: int, n_test: int, trials: int) -> float:
    """Three standard deviations of the mean coverage of ``trials`` splits (beta-binomial variance at 1 - alpha)."""
    p = 1 - ALPHA
    var = p * (1 - p) / n_test + (1 - 1 / n_test) * p * (1 - p) / (n_cal + 2)
    return 3 * math.sqrt(var / trials)


def test_coverage_over_many_splits_with_negative_control(parent_observations):
    """Split-conformal on parent scores covers >= 1 - alpha on average; the same rule without the
    (n+1) correction (rank floor(n(1 - alpha))) fails the same test at n=20."""
    n = len(parent_observations)
    for n_cal, trials in ((N_CAL, 200), (20, 400)):
        tol = _tolerance(n_cal, n - n_cal, trials)
        cov, _ = _trials(parent_observations, n_cal, lambda m: math.ceil((m + 1) * (1 - ALPHA)), trials, SEED + n_cal)
        assert cov.mean() >= 1 - ALPHA - tol, (n_cal, cov.mean(), tol)
    naive, _ = _trials(parent_observations, 20, lambda m: math.floor(m * (1 - ALPHA)), 400, SEED + 20)
    assert naive.mean() < 1 - ALPHA - _tolerance(20, n - 20, 400), naive.mean()
    # the library's own threshold is the corrected one (the plain rank with miss_bound=0; by default the flagged rank)
    scores = [o.score("relative") for o in parent_observations[:20]]
    assert conformal_quantile(scores, ALPHA, miss_bound=0) == np.sort(scores)[math.ceil(21 * 0.9) - 1]
    rank = flagged_rank(20, ALPHA)
    assert rank is not None and conformal_quantile(scores, ALPHA) == np.sort(scores)[rank.rank - 1]


def test_sets_are_small_and_keep_everything_fails(parent_observations):
    """Mean set size (parents) at alpha=0.1 stays under 3; keeping the whole parent pool covers too but fails."""
    cov, size = _trials(parent_observations, N_CAL, lambda m: math.ceil((m + 1) * (1 - ALPHA)), 50, SEED)
    everything = np.mean([len(o.scores) for o in parent_observations])
    assert size.mean() < 3.0 < everything
    assert cov.mean() >= 1 - ALPHA - _tolerance(N_CAL, len(parent_observations) - N_CAL, 50)


def test_automerging_retriever_host(long_documents, chroma_memory_client, split, cal, retriever):
    """An AutoMergingRetriever brings its vector retriever and docstore; gold document ids are lifted to the
    HierarchicalNodeParser's parents (PARENT relationship); same chunks and parents give the flat threshold."""
    stack = build_parent_stack(long_documents[0], layout="hierarchical", client=chroma_memory_client)
    host = AutoMergingRetriever(stack.index.as_retriever(similarity_top_k=POOL), stack.storage_context)
    am_cal = calibrate_retriever(host, split[0], confidence_level=1 - ALPHA, options=RetrievalOptions(progress=False))
    assert am_cal.threshold_ == pytest.approx(cal.threshold_, abs=1e-6)
    conformal = ConformalRetriever(retriever=host, calibration=am_cal)
    engine = RetrieverQueryEngine.from_args(conformal, llm=MockLLM())
    q = split[1][0]
    nodes = engine.query(q.question).source_nodes
    assert nodes and all(n.node.node_id in stack.parents for n in nodes)
    assert [n.node.source_node.node_id for n in nodes] == _ids(retriever.retrieve(q.question))
    for n in nodes:
        chunk_ids = [c["id"] for c in n.node.metadata[CHUNKS_METADATA_KEY]]
        assert all(stack.storage_context.docstore.get_node(c).parent_node.node_id == n.node.node_id for c in chunk_ids)


def test_recursive_retriever_host(chunk_retriever, flat, retriever, cal, split):
    """A RecursiveRetriever (root = the chunk retriever, node_dict = the parents) gives the same sets."""
    host = RecursiveRetriever("vector", retriever_dict={"vector": chunk_retriever}, node_dict=flat.parents)
    recursive = ConformalRetriever(retriever=host, calibration=cal)
    for q in split[1][:15]:
        got, want = recursive.retrieve(q.question), retriever.retrieve(q.question)
        assert _ids(got) == _ids(want) and [n.score for n in got] == [n.score for n in want]


def test_recursive_retriever_with_index_nodes(flat, long_documents):
    """The RecursiveRetriever pattern proper: IndexNode chunks (no relationships) whose ``index_id`` names the
    parent in ``node_dict``; a SimpleVectorStore index; calibrated and queried through the RecursiveRetriever."""
    keep = [d.id for d in long_documents[0][:4]]
    chunks = [c for c in flat.chunks if c.source_node.node_id in keep]
    nodes = [IndexNode(id_=f"ix-{c.node_id}", text=c.text, index_id=c.source_node.node_id) for c in chunks]
    vector = VectorStoreIndex(nodes, embed_model=MiniLMEmbedding()).as_retriever(similarity_top_k=POOL)
    host = RecursiveRetriever("vector", retriever_dict={"vector": vector}, node_dict={k: flat.parents[k] for k in keep})
    questions = [q for q in long_documents[1] if q.gold_ids[0] in keep]
    rec_cal = calibrate_retriever(
        host,
        questions[:30],
        confidence_level=0.8,
        options=RetrievalOptions(progress=False),
    )
    assert rec_cal.fingerprint_.retriever.endswith(">parent:max") and rec_cal.n_calibration_ == 30
    got = ConformalRetriever(retriever=host, calibration=rec_cal).retrieve(questions[-1].question)
    assert got and all(n.node.node_id in keep for n in got)
    for n in got:
        assert all(c["id"].startswith(f"ix-{n.node.node_id}::chunk") for c in n.node.metadata[CHUNKS_METADATA_KEY])


def test_three_level_hierarchy_gold(long_documents):
    """HierarchicalNodeParser with three levels: parents are the level above the leaves, and gold given as a
    document, root, parent or leaf id all become parent ids; the calibration path queries the leaves."""
    from llama_index.core import StorageContext
    from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes, get_root_nodes

    documents = [Document(id_=d.id, text=d.text) for d in long_documents[0][:2]]
    nodes = HierarchicalNodeParser.from_defaults(chunk_sizes=[1024, 256, 96]).get_nodes_from_documents(documents)
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    leaves = get_leaf_nodes(nodes)
    index = VectorStoreIndex(leaves, storage_context=storage, embed_model=MiniLMEmbedding())
    host = AutoMergingRetriever(index.as_retriever(similarity_top_k=POOL), storage)
    level = resolve_parent_level(host)
    root, leaf = get_root_nodes(nodes)[0], leaves[0]
    mids = [n.node_id for n in nodes if n.parent_node is not None and n.parent_node.node_id == root.node_id]
    doc_mids = [
        n.node_id
        for n in nodes
        if n.child_nodes and n.parent_node is not None and n.source_node.node_id == documents[0].doc_id
    ]
    gold = (documents[0].doc_id, root.node_id, mids[0], leaf.node_id)
    lifted = level.lift_gold([CalibrationExample("q", gold_ids=(g,)) for g in gold], level.retriever)
    assert [ex.gold_ids for ex in lifted] == [tuple(doc_mids), tuple(mids), (mids[0],), (leaf.parent_node.node_id,)]
    assert len(mids) > 1 and set(mids) <= set(doc_mids)
    pool = level.parent_pool(level.retriever.retrieve(long_documents[1][0].question))
    assert set(pool.ids) <= {n.node_id for n in nodes if n.child_nodes and n.parent_node is not None}


def test_sum_aggregation(chunk_retriever, docstore, split, cal):
    cal_sum = calibrate_retriever(
        chunk_retriever,
        split[0][:120],
        parents=docstore,
        parent_aggregation="sum",
        options=RetrievalOptions(progress=False),
    )
    assert cal_sum.fingerprint_.retriever.endswith(">parent:sum")
    nodes = ConformalRetriever(
        retriever=chunk_retriever, calibration=cal_sum, parents=docstore, parent_aggregation="sum"
    ).retrieve(split[1][0].question)
    assert nodes and nodes[0].score >= 1.0  # the top chunk alone adds 1 after min-max normalisation
    with pytest.raises(FingerprintMismatchError, match="parent:max"):
        ConformalRetriever(retriever=chunk_retriever, calibration=cal, parents=docstore, parent_aggregation="sum")


def test_async_matches_sync(retriever, split):
    questions = [q.question for q in split[1][:4]]

    async def run():
        return await asyncio.gather(*(retriever.aretrieve(q) for q in questions))

    for q, got in zip(questions, asyncio.run(run()), strict=True):
        want = retriever.retrieve(q)
        assert _ids(got) == _ids(want) and [n.score for n in got] == [n.score for n in want]


def test_saved_calibration_keeps_the_level(cal, chunk_retriever, docstore, tmp_path, split):
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "parent.json"))
    assert loaded.fingerprint_ == cal.fingerprint_
    nodes = ConformalRetriever(retriever=chunk_retriever, calibration=loaded, parents=docstore).retrieve(
        split[1][1].question
    )
    assert nodes and all(docstore.document_exists(n.node.node_id) for n in nodes)


def test_level_mismatch_is_refused(cal, chunk_retriever, docstore):
    with pytest.raises(ConformalError, match="made at parent level"):
        ConformalRetriever(retriever=chunk_retriever, calibration=cal)
    chunk_level = replace(cal, fingerprint_=fingerprint_of(chunk_retriever))
    with pytest.raises(ConformalError, match="made at chunk level"):
        ConformalRetriever(retriever=chunk_retriever, calibration=chunk_level, parents=docstore)


def test_parent_missing_from_store(chunk_retriever, cal, flat, split):
    q = split[1][2]
    partial = {k: v for k, v in flat.parents.items() if k != q.gold_ids[0]}
    conformal = ConformalRetriever(retriever=chunk_retriever, calibration=cal, parents=partial)
    with pytest.raises(CalibrationError, match="is not in the store"):
        conformal.retrieve(q.question)
    present = replace(q, gold_ids=(next(iter(partial)),))
    with pytest.raises(CalibrationError, match=r"Parent document .* is not in the store"):
        calibrate_retriever(chunk_retriever, [present], parents=partial, options=RetrievalOptions(progress=False))


def test_chunk_without_parent(cal, docstore):
    nodes = [TextNode(id_=f"orphan{i}", text=t) for i, t in enumerate(["Rollo led the Normans.", "Paris is a city."])]
    orphans = VectorStoreIndex(nodes, embed_model=MiniLMEmbedding()).as_retriever(similarity_top_k=POOL)
    unchecked = ServingOptions(check_fingerprint=False)
    conformal = ConformalRetriever(retriever=orphans, calibration=cal, parents=docstore, options=unchecked)
    with pytest.raises(ConformalError, match="has no parent"):
        conformal.retrieve("Who led the Normans?")
    with pytest.raises(CalibrationError, match="has no parent"):
        calibrate_retriever(
            orphans,
            [CalibrationExample("Who?", gold_ids=("orphan0",))],
            parents=docstore,
            options=RetrievalOptions(progress=False),
        )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"parents": "docstore.json"}, ConformalError, "must be a LlamaIndex docstore"),
        ({"parents": {"a": "text"}}, ConformalError, "map ids to LlamaIndex nodes"),
        ({"parent_aggregation": "sum"}, ConformalError, "needs parents"),
        ({"parents": [], "parent_aggregation": "median"}, CalibrationError, "parent aggregation must be one of"),
    ],
)
def test_bad_parent_options(chunk_retriever, cal, kwargs, error, match):
    with pytest.raises(error, match=match):
        ConformalRetriever(retriever=chunk_retriever, calibration=cal, **kwargs)


def test_unknown_gold_id(chunk_retriever, docstore):
    with pytest.raises(CalibrationError, match="not in the store"):
        calibrate_retriever(
            chunk_retriever,
            [CalibrationExample("Who?", gold_ids=("no-such-doc",))],
            parents=docstore,
            options=RetrievalOptions(progress=False),
        )
