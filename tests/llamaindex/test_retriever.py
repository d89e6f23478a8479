"""LlamaIndex drop-in: ``calibrate_retriever`` + ``ConformalRetriever`` through the public API on the real stack."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import get_response_synthesizer
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode

from conformal_rag_plugins.llamaindex import ConformalRetriever, fingerprint_of
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.serving import CONFORMAL_METADATA_KEYS, ServingOptions

from .. import dropin_checks as checks

pytestmark = pytest.mark.integration

VIEW = checks.LlamaIndexNodes()


@pytest.fixture(scope="module")
def host(host_factory):
    return host_factory("llamaindex", "hybrid").host


@pytest.fixture(scope="module")
def retriever(host, li_hybrid_calibration):
    return ConformalRetriever(retriever=host, calibration=li_hybrid_calibration)


@pytest.fixture(scope="module")
def observations(observations_factory):
    return observations_factory("llamaindex", "hybrid")


def _check_nodes(nodes, cal) -> None:
    checks.check_conformal_set(VIEW, nodes, cal)
    for n in nodes:
        meta = n.node.metadata
        assert set(CONFORMAL_METADATA_KEYS) <= set(meta)
        assert meta["conformal_score"] == n.score
        assert meta["conformal_nonconformity"] >= 0.0


def test_calibration_through_api_matches_core(li_hybrid_calibration, observations, dropin_split):
    cal = li_hybrid_calibration
    assert len(dropin_split.calibration) == 300
    fp = cal.fingerprint_
    assert fp.framework == "llamaindex"
    assert fp.store.startswith("QueryFusionRetriever[") and fp.distance == "cosine" and fp.embedding_dim == 384
    # the adapter's threshold is exactly the core quantile of the same questions' host scores
    scores = checks.check_calibration_matches_core(cal, observations, dropin_split)
    assert sorted(cal.scores_) == sorted(scores)


def test_direct_sync_and_async(retriever, li_hybrid_calibration, squad_questions, dropin_split):
    questions = [squad_questions[i].question for i in dropin_split.held_out[:5]]
    checks.check_sync_and_async(VIEW, retriever, li_hybrid_calibration, questions, _check_nodes)


def test_held_out_coverage(retriever, li_hybrid_calibration, observations, squad_questions, dropin_split):
    """Every held-out set equals the core's set on the same pool, and coverage is about 1 - alpha."""
    checks.check_held_out_coverage(VIEW, retriever, li_hybrid_calibration, observations, squad_questions, dropin_split)


def test_inside_retriever_query_engine(retriever, host, squad_questions, dropin_split):
    ex, nodes = checks.covered_question(VIEW, retriever, squad_questions, dropin_split)
    engine = RetrieverQueryEngine(
        retriever=retriever,
        response_synthesizer=get_response_synthesizer(llm=MockLLM(), response_mode="compact"),
    )
    response = engine.query(ex.question)
    assert VIEW.ids(response.source_nodes) == VIEW.ids(nodes)
    assert all(n.node.metadata["conformal_guaranteed"] for n in response.source_nodes)
    # MockLLM echoes its prompt: the gold passage reached the LLM, the conformal metadata did not
    gold = next(n for n in nodes if n.node.node_id in ex.gold_ids)
    text = str(response)
    assert gold.node.get_content(metadata_mode=MetadataMode.NONE)[:200] in text
    assert "conformal_threshold" not in text
    aresponse = asyncio.run(engine.aquery(ex.question))
    assert VIEW.ids(aresponse.source_nodes) == VIEW.ids(nodes)


def test_save_load_round_trip(tmp_path, host, li_hybrid_calibration, retriever, squad_questions, dropin_split):
    path = li_hybrid_calibration.save(tmp_path / "calibration.json")
    loaded = RetrievalCalibration.load(path, expected=fingerprint_of(host))
    assert loaded == li_hybrid_calibration
    assert loaded.threshold_ == li_hybrid_calibration.threshold_
    reloaded = ConformalRetriever(retriever=host, calibration=loaded)
    checks.check_same_sets(VIEW, retriever, reloaded, [squad_questions[i].question for i in dropin_split.held_out[:10]])


def test_max_k_cut_warns_and_min_k_pads(host, li_hybrid_calibration, retriever, squad_questions, dropin_split):
    ex, full = checks.covered_question(VIEW, retriever, squad_questions, dropin_split, min_size=2)
    capped = ConformalRetriever(retriever=host, calibration=li_hybrid_calibration, options=ServingOptions(max_k=1))
    checks.check_max_k_cut(VIEW, capped, ex.question, full)
    pad = ServingOptions(min_k=len(full) + 3)
    padded = ConformalRetriever(retriever=host, calibration=li_hybrid_calibration, options=pad)
    checks.check_min_k_pads(VIEW, padded, ex.question, full)


def test_vector_store_index_calibration(
    li_index, li_index_calibration, observations_factory, squad_questions, dropin_split
):
    cal = li_index_calibration
    assert cal.fingerprint_.store == "ChromaVectorStore"
    assert cal.fingerprint_.score_scale == "exp(-distance)"
    assert cal.fingerprint_.retriever.startswith("dense")
    assert cal.pool_size_ == 50 and cal.n_calibration_ == 150
    dense = observations_factory("llamaindex", "dense")
    retriever = ConformalRetriever(index=li_index, calibration=cal)
    checks.check_vector_store_sets(VIEW, retriever, cal, dense, squad_questions, dropin_split)
