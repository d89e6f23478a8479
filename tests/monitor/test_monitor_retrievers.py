"""``monitor=`` on both frameworks' ``ConformalRetriever``: every query (sync and async) updates the monitor.

The calibrations are the drop-in tests' (``calibrate_retriever`` on the hybrid host, 300
questions); the monitor's reference is the top-1 score of the same calibration questions
from the session's precomputed pools.
"""

from __future__ import annotations

import asyncio

import pytest

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.serving import ServingOptions

pytestmark = pytest.mark.integration

N_QUERIES = 6


def _monitor(observations_factory, framework, calibration, dropin_split, **kwargs) -> ConformalMonitor:
    obs = observations_factory(framework, "hybrid")
    return ConformalMonitor.from_observations(
        calibration, [obs[i] for i in dropin_split.calibration], delta=0.01, **kwargs
    )


def _expect(monitor, observations, held) -> None:
    assert monitor.n_stream == len(held)
    assert monitor.stream == pytest.approx([float(observations[i].scores[0]) for i in held])
    assert len(monitor.p_values) == len(monitor.martingale) == len(held)
    assert all(0.0 < p < 1.0 for p in monitor.p_values)
    assert not monitor.alarm  # six held-out SQuAD questions are no drift


def test_llamaindex_retriever_updates_the_monitor(
    host_factory, li_hybrid_calibration, observations_factory, squad_questions, dropin_split
) -> None:
    from conformal_rag_plugins.llamaindex import ConformalRetriever

    monitor = _monitor(observations_factory, "llamaindex", li_hybrid_calibration, dropin_split)
    retriever = ConformalRetriever(
        li_hybrid_calibration,
        retriever=host_factory("llamaindex", "hybrid").host,
        options=ServingOptions(monitor=monitor),
    )
    held = dropin_split.held_out[:N_QUERIES]
    for i in held[:3]:
        nodes = retriever.retrieve(squad_questions[i].question)
        assert monitor.stream[-1] == pytest.approx(nodes[0].score)
    for i in held[3:]:
        asyncio.run(retriever.aretrieve(squad_questions[i].question))
    _expect(monitor, observations_factory("llamaindex", "hybrid"), held)


def test_langchain_retriever_updates_the_monitor(
    host_factory, lc_hybrid_calibration, observations_factory, squad_questions, dropin_split
) -> None:
    from conformal_rag_plugins.langchain import ConformalRetriever

    monitor = _monitor(observations_factory, "langchain", lc_hybrid_calibration, dropin_split, statistic="top1")
    retriever = ConformalRetriever(
        calibration=lc_hybrid_calibration,
        retriever=host_factory("langchain", "hybrid").host,
        options=ServingOptions(monitor=monitor),
    )
    held = dropin_split.held_out[:N_QUERIES]
    for i in held[:3]:
        docs = retriever.invoke(squad_questions[i].question)
        assert monitor.stream[-1] == pytest.approx(docs[0].metadata["score"])
    for i in held[3:]:
        asyncio.run(retriever.ainvoke(squad_questions[i].question))
    _expect(monitor, observations_factory("langchain", "hybrid"), held)


def test_set_size_statistic_matches_the_returned_set(
    host_factory, li_hybrid_calibration, observations_factory, squad_questions, dropin_split
) -> None:
    from conformal_rag_plugins.llamaindex import ConformalRetriever

    monitor = _monitor(observations_factory, "llamaindex", li_hybrid_calibration, dropin_split, statistic="set_size")
    retriever = ConformalRetriever(
        li_hybrid_calibration,
        retriever=host_factory("llamaindex", "hybrid").host,
        options=ServingOptions(monitor=monitor),
    )
    nodes = retriever.retrieve(squad_questions[dropin_split.held_out[0]].question)
    assert monitor.stream == [float(len(nodes))]


def test_a_monitor_of_another_calibration_is_refused(
    host_factory, li_hybrid_calibration, lc_hybrid_calibration, observations_factory, dropin_split
) -> None:
    from conformal_rag_plugins.langchain import ConformalRetriever as LCRetriever
    from conformal_rag_plugins.llamaindex import ConformalRetriever

    li_monitor = _monitor(observations_factory, "llamaindex", li_hybrid_calibration, dropin_split)
    with pytest.raises(ConformalError, match="framework"):
        LCRetriever(
            calibration=lc_hybrid_calibration,
            retriever=host_factory("langchain", "hybrid").host,
            options=ServingOptions(monitor=li_monitor),
        )
    lc_monitor = _monitor(observations_factory, "langchain", lc_hybrid_calibration, dropin_split)
    with pytest.raises(ConformalError, match="framework"):
        ConformalRetriever(
            li_hybrid_calibration,
            retriever=host_factory("llamaindex", "hybrid").host,
            options=ServingOptions(monitor=lc_monitor),
        )


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_pool_scores_give_the_reference_the_stream_statistic(
    framework, host_factory, li_hybrid_calibration, lc_hybrid_calibration, squad_questions, dropin_split
) -> None:
    """A question asked for the reference and again in the stream gets the same statistic: one function for both."""
    host = host_factory(framework, "hybrid").host
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever

        cal = li_hybrid_calibration
        plain = ConformalRetriever(cal, retriever=host)
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever as LCRetriever

        cal = lc_hybrid_calibration
        plain = LCRetriever(calibration=cal, retriever=host)
    questions = [squad_questions[i].question for i in dropin_split.calibration[:4]]
    served = [plain.pool_scores(q) for q in questions]
    assert {(s.unit, s.group) for s in served} == {("chunk", None)}
    monitor = ConformalMonitor.from_observations(cal, served, statistic="set_size", delta=0.01)
    if framework == "llamaindex":
        ask = ConformalRetriever(cal, retriever=host, options=ServingOptions(monitor=monitor)).retrieve
    else:
        ask = LCRetriever(calibration=cal, retriever=host, options=ServingOptions(monitor=monitor)).invoke
    for q in questions:
        ask(q)
    assert monitor.stream == monitor.reference
