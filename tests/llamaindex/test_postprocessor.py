"""One-line swap in the LlamaIndex starter: ``SimilarityPostprocessor`` -> ``ConformalNodePostprocessor``.

The starter pattern is ``VectorStoreIndex(...).as_query_engine(similarity_top_k=..., node_postprocessors=[...])``
over the bundled SQuAD subset in Chroma with MiniLM embeddings; only the postprocessor line changes.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.core.errors import ConformalError, FingerprintMismatchError
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor, ConformalRetriever, calibrate_retriever
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import ServingOptions

from ..dropin_checks import assert_covers_within_3_sd, assert_split_rule_covers

pytestmark = pytest.mark.integration

CONFIDENCE = 0.9
POOL = 50


@pytest.fixture(scope="module")
def calibration(li_index, dropin_examples):
    """Calibrated with the same helper that drives the host index, on the 300 calibration questions."""
    return calibrate_retriever(
        li_index,
        dropin_examples,
        confidence_level=CONFIDENCE,
        pool_size=POOL,
        options=RetrievalOptions(progress=False),
    )


def _engine(index, postprocessors, top_k=POOL):
    # the app's existing line, with only the postprocessor swapped
    return index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=top_k, node_postprocessors=postprocessors)


def test_one_line_swap_covers_held_out_questions(
    li_index, calibration, observations_factory, squad_questions, dropin_split
):
    before = _engine(li_index, [SimilarityPostprocessor(similarity_cutoff=0.5)])
    after = _engine(li_index, [ConformalNodePostprocessor(calibration=calibration)])
    dense = observations_factory("llamaindex", "dense")
    covered, sizes = [], []
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        ids = [n.node.node_id for n in after.query(ex.question).source_nodes]
        expect = dense[i].covered_and_size(calibration.score_family_, calibration.threshold_)
        assert (any(g in ids for g in ex.gold_ids), len(ids)) == expect, ex.question  # the core's set, exactly
        covered.append(expect[0])
        sizes.append(len(ids))
    # this one split: within 3 sd of a random calibration draw (BetaBinomial), as the drop-in tests check
    assert_covers_within_3_sd(covered, calibration.n_calibration_, 1 - CONFIDENCE)
    assert 1.0 <= float(np.mean(sizes)) < POOL / 5, np.mean(sizes)  # keeping the whole pool would fail this
    # the guarantee is over calibration draws: the same rule over 300 seeded splits of the 705 questions
    # (the postprocessor's set is the core's set, checked above) covers >= 1 - alpha - 0.01 on average
    assert_split_rule_covers(dense, 1 - CONFIDENCE)
    assert before.query(squad_questions[dropin_split.held_out[0]].question).source_nodes is not None


def test_same_set_as_conformal_retriever_sync_and_async(li_index, calibration, squad_questions, dropin_split):
    engine = _engine(li_index, [ConformalNodePostprocessor(calibration=calibration, index=li_index)])
    retriever = ConformalRetriever(index=li_index, calibration=calibration)
    for i in dropin_split.held_out[:5]:
        q = squad_questions[i].question
        want = [n.node.node_id for n in retriever.retrieve(q)]
        assert [n.node.node_id for n in engine.query(q).source_nodes] == want
        got = asyncio.run(engine.aquery(q)).source_nodes
        assert [n.node.node_id for n in got] == want
        assert all(n.node.metadata["conformal_threshold"] == calibration.threshold_ for n in got)


def test_retriever_query_engine_pattern(li_index, calibration, squad_questions, dropin_split):
    engine = RetrieverQueryEngine.from_args(
        li_index.as_retriever(similarity_top_k=POOL),
        llm=MockLLM(max_tokens=1),
        node_postprocessors=[ConformalNodePostprocessor(calibration=calibration)],
    )
    nodes = engine.query(squad_questions[dropin_split.held_out[1]].question).source_nodes
    assert 1 <= len(nodes) < POOL


@pytest.mark.parametrize("top_k", [POOL - 10, POOL + 10])
def test_refuses_another_top_k(li_index, calibration, squad_questions, top_k):
    engine = _engine(li_index, [ConformalNodePostprocessor(calibration=calibration)], top_k=top_k)
    with pytest.raises(ConformalError, match=f"similarity_top_k={POOL}"):
        engine.query(squad_questions[0].question)
    with pytest.raises(ConformalError, match="similarity_top_k"):
        ConformalNodePostprocessor(calibration=calibration, retriever=li_index.as_retriever(similarity_top_k=top_k))


def test_says_when_an_earlier_postprocessor_cut_the_pool(li_index, calibration, squad_questions):
    cut = SimilarityPostprocessor(similarity_cutoff=0.55)
    engine = _engine(li_index, [cut, ConformalNodePostprocessor(calibration=calibration)])
    with pytest.raises(ConformalError, match="earlier node postprocessor already cut the pool"):
        engine.query(squad_questions[0].question)


def test_refuses_nodes_without_scores_and_another_pipeline(li_index, calibration, lc_store_calibration):
    post = ConformalNodePostprocessor(calibration=calibration)
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text="x"), score=0.5) for i in range(POOL)]
    nodes[3] = NodeWithScore(node=TextNode(id_="n3", text="x"), score=None)
    with pytest.raises(ConformalError, match="'n3' has no score"):
        post.postprocess_nodes(nodes, query_str="q")
    with pytest.raises(FingerprintMismatchError):
        ConformalNodePostprocessor(calibration=lc_store_calibration, index=li_index)
    with pytest.raises(ConformalError, match="RetrievalCalibration"):
        ConformalNodePostprocessor(calibration={"threshold": 0.1})


def test_drift_monitor_is_updated_by_every_query(
    li_index, calibration, observations_factory, squad_questions, dropin_split
):
    from conformal_rag_plugins.monitor.monitor import ConformalMonitor

    dense = observations_factory("llamaindex", "dense")
    monitor = ConformalMonitor.from_observations(calibration, [dense[i] for i in dropin_split.calibration])
    engine = _engine(
        li_index, [ConformalNodePostprocessor(calibration=calibration, options=ServingOptions(monitor=monitor))]
    )
    for i in dropin_split.held_out[:3]:
        engine.query(squad_questions[i].question)
    assert monitor.n_stream == 3 and len(monitor.p_values) == 3
    assert monitor.stream == [pytest.approx(dense[i].scores[0]) for i in dropin_split.held_out[:3]]
