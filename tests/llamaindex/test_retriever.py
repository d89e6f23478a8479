"""LlamaIndex drop-in: ``calibrate_retriever`` + ``ConformalRetriever`` through the public API on the real stack."""

from __future__ import annotations

import asyncio
import math
import warnings

import numpy as np
import pytest
from llama_index.core import get_response_synthesizer
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode

from conformal_rag_plugins.core.errors import GuaranteeCutWarning
from conformal_rag_plugins.core.quantile import conformal_quantile, conformal_rank
from conformal_rag_plugins.llamaindex import ConformalRetriever, fingerprint_of
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.serving import CONFORMAL_METADATA_KEYS, ServingOptions

pytestmark = pytest.mark.integration

ALPHA = 0.1


@pytest.fixture(scope="module")
def host(host_factory):
    return host_factory("llamaindex", "hybrid").host


@pytest.fixture(scope="module")
def retriever(host, li_hybrid_calibration):
    return ConformalRetriever(retriever=host, calibration=li_hybrid_calibration)


@pytest.fixture(scope="module")
def observations(observations_factory):
    return observations_factory("llamaindex", "hybrid")


def _ids(nodes) -> list[str]:
    return [n.node.node_id for n in nodes]


def _check_nodes(nodes, cal) -> None:
    assert nodes, "the conformal set is never empty for the relative family (the top chunk has r = 0)"
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)
    for n in nodes:
        meta = n.node.metadata
        assert set(CONFORMAL_METADATA_KEYS) <= set(meta)
        assert meta["conformal_score"] == n.score
        assert meta["conformal_threshold"] == cal.threshold_
        assert meta["conformal_alpha"] == pytest.approx(ALPHA)
        assert meta["conformal_score_family"] == "relative"
        assert meta["conformal_guaranteed"] is True
        assert meta["conformal_set_size"] == len(nodes)
        assert 0.0 <= meta["conformal_nonconformity"] <= cal.threshold_ + 1e-12
        assert meta["conformal_nonconformity"] == pytest.approx(scores[0] - n.score)


def test_calibration_through_api_matches_core(li_hybrid_calibration, observations, dropin_split):
    cal = li_hybrid_calibration
    assert cal.n_calibration_ == len(dropin_split.calibration) == 300
    assert (cal.alpha_, cal.method_, cal.score_family_, cal.pool_size_) == (
        pytest.approx(ALPHA),
        "split",
        "relative",
        50,
    )
    fp = cal.fingerprint_
    assert fp.framework == "llamaindex"
    assert fp.store.startswith("QueryFusionRetriever[") and fp.distance == "cosine" and fp.embedding_dim == 384
    # the adapter's threshold is exactly the core quantile of the same questions' host scores
    scores = [observations[i].score("relative") for i in dropin_split.calibration]
    assert cal.threshold_ == conformal_quantile(scores, ALPHA)
    assert cal.n_misses_ == sum(1 for s in scores if math.isinf(s))
    assert sorted(cal.scores_) == sorted(scores)
    assert 0 < cal.threshold_ < math.inf


def test_direct_sync_and_async(retriever, li_hybrid_calibration, squad_questions, dropin_split):
    for i in dropin_split.held_out[:5]:
        question = squad_questions[i].question
        nodes = retriever.retrieve(question)
        _check_nodes(nodes, li_hybrid_calibration)
        again = asyncio.run(retriever.aretrieve(question))
        assert _ids(again) == _ids(nodes)
        assert [n.score for n in again] == [n.score for n in nodes]


def test_held_out_coverage(retriever, li_hybrid_calibration, observations, squad_questions, dropin_split):
    """Every held-out set equals the core's set on the same pool, and coverage is about 1 - alpha."""
    cal = li_hybrid_calibration
    covered, sizes = [], []
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        ids = _ids(retriever.retrieve(ex.question))
        hit = any(g in ids for g in ex.gold_ids)
        expect_hit, expect_size = observations[i].covered_and_size(cal.score_family_, cal.threshold_)
        assert (hit, len(ids)) == (expect_hit, expect_size), ex.question
        covered.append(hit)
        sizes.append(len(ids))
    n_cal, n_test = cal.n_calibration_, len(covered)
    k = conformal_rank(n_cal, ALPHA)
    # test coverage given a random calibration draw ~ BetaBinomial(n_test, k, n_cal+1-k) / n_test: 3 sd below
    sd = math.sqrt(k * (n_cal + 1 - k) * (n_cal + 1 + n_test) / (n_test * (n_cal + 1) ** 2 * (n_cal + 2)))
    coverage = float(np.mean(covered))
    assert coverage >= 1 - ALPHA - 3 * sd, (coverage, sd)
    assert coverage < 1.0  # a threshold that keeps everything would be useless, not "covering"
    assert 1.0 <= float(np.mean(sizes)) <= 3.0, np.mean(sizes)


def _covered_question(retriever, squad_questions, dropin_split, min_size: int = 1):
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        nodes = retriever.retrieve(ex.question)
        if len(nodes) >= min_size and any(g in _ids(nodes) for g in ex.gold_ids):
            return ex, nodes
    raise AssertionError(f"no held-out question has a covered set of size >= {min_size}")


def test_inside_retriever_query_engine(retriever, host, squad_questions, dropin_split):
    ex, nodes = _covered_question(retriever, squad_questions, dropin_split)
    engine = RetrieverQueryEngine(
        retriever=retriever,
        response_synthesizer=get_response_synthesizer(llm=MockLLM(), response_mode="compact"),
    )
    response = engine.query(ex.question)
    assert _ids(response.source_nodes) == _ids(nodes)
    assert all(n.node.metadata["conformal_guaranteed"] for n in response.source_nodes)
    # MockLLM echoes its prompt: the gold passage reached the LLM, the conformal metadata did not
    gold = next(n for n in nodes if n.node.node_id in ex.gold_ids)
    text = str(response)
    assert gold.node.get_content(metadata_mode=MetadataMode.NONE)[:200] in text
    assert "conformal_threshold" not in text
    aresponse = asyncio.run(engine.aquery(ex.question))
    assert _ids(aresponse.source_nodes) == _ids(nodes)


def test_save_load_round_trip(tmp_path, host, li_hybrid_calibration, retriever, squad_questions, dropin_split):
    path = li_hybrid_calibration.save(tmp_path / "calibration.json")
    loaded = RetrievalCalibration.load(path, expected=fingerprint_of(host))
    assert loaded == li_hybrid_calibration
    assert loaded.threshold_ == li_hybrid_calibration.threshold_
    reloaded = ConformalRetriever(retriever=host, calibration=loaded)
    for i in dropin_split.held_out[:10]:
        question = squad_questions[i].question
        a, b = retriever.retrieve(question), reloaded.retrieve(question)
        assert _ids(a) == _ids(b)
        assert [n.score for n in a] == [n.score for n in b]
        assert [n.node.metadata for n in a] == [n.node.metadata for n in b]


def test_max_k_cut_warns_and_min_k_pads(host, li_hybrid_calibration, retriever, squad_questions, dropin_split):
    ex, full = _covered_question(retriever, squad_questions, dropin_split, min_size=2)
    capped = ConformalRetriever(retriever=host, calibration=li_hybrid_calibration, options=ServingOptions(max_k=1))
    with pytest.warns(GuaranteeCutWarning, match="max_k=1"):
        nodes = capped.retrieve(ex.question)
    assert _ids(nodes) == _ids(full)[:1]
    assert nodes[0].node.metadata["conformal_guaranteed"] is False
    assert nodes[0].node.metadata["conformal_set_size"] == len(full)
    pad = ServingOptions(min_k=len(full) + 3)
    padded = ConformalRetriever(retriever=host, calibration=li_hybrid_calibration, options=pad)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GuaranteeCutWarning)
        more = padded.retrieve(ex.question)
    assert len(more) == len(full) + 3
    assert _ids(more)[: len(full)] == _ids(full)
    assert all(n.node.metadata["conformal_guaranteed"] for n in more)


def test_vector_store_index_calibration(
    li_index, li_index_calibration, observations_factory, squad_questions, dropin_split
):
    cal = li_index_calibration
    assert cal.fingerprint_.store == "ChromaVectorStore"
    assert cal.fingerprint_.score_scale == "exp(-distance)"
    assert cal.fingerprint_.retriever.startswith("dense")
    assert cal.pool_size_ == 50 and cal.n_calibration_ == 150
    dense = observations_factory("llamaindex", "dense")
    assert cal.threshold_ == conformal_quantile(
        [dense[i].score("relative") for i in dropin_split.calibration[:150]], ALPHA
    )
    retriever = ConformalRetriever(index=li_index, calibration=cal)
    for i in dropin_split.held_out[:5]:
        nodes = retriever.retrieve(squad_questions[i].question)
        assert (len(nodes) > 0) and all(n.node.metadata["conformal_threshold"] == cal.threshold_ for n in nodes)
        assert len(nodes) == dense[i].covered_and_size("relative", cal.threshold_)[1]
        assert _ids(asyncio.run(retriever.aretrieve(squad_questions[i].question))) == _ids(nodes)
