"""Tracing through both frameworks: one query records nested host, retriever, LLM and synthesizer runs.

LlamaIndex: a ``LlamaDebugHandler`` (callback events) and a ``SimpleSpanHandler`` plus an
event handler on the root instrumentation dispatcher. LangChain: a ``RunCollectorCallbackHandler``
(a ``BaseTracer``) whose run tree must hold the host retriever under the ``ConformalRetriever``
and the chat-model runs under the synthesizer. Each case runs sync, async, and sync from inside
a running event loop (Jupyter), where the work runs on ``run_sync``'s worker thread.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/llamaindex/adaptive_synthesizer.py

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from llama_index.core.base.base_retriever import BaseRetriever as LIBaseRetriever
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer as LCSynth
from conformal_rag_plugins.langchain import ConformalRetriever as LCRetriever
from conformal_rag_plugins.llamaindex import AdaptiveContextSynthesizer
from conformal_rag_plugins.llamaindex import ConformalAnswerSetSynthesizer as LISynth
from conformal_rag_plugins.llamaindex import ConformalRetriever as LIRetriever
from conformal_rag_plugins.retrieval.serving import ServingOptions

TEXTS = ["Rollo led the Norse.", "Normandy is in France.", "Far away text."]
SCORES = [0.9, 0.85, 0.1]


class _Host(LIBaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        pairs = enumerate(zip(TEXTS, SCORES, strict=True))
        return [NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=s) for i, (t, s) in pairs]


class _LCHost(LCBaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        pairs = enumerate(zip(TEXTS, SCORES, strict=True))
        return [Document(id=f"d{i}", page_content=t, metadata={"score": s}) for i, (t, s) in pairs]


class _Tree(LlamaDebugHandler):
    """A ``LlamaDebugHandler`` that keeps the last trace's parent -> children map."""

    def end_trace(self, trace_id: str | None = None, trace_map: dict[str, list[str]] | None = None) -> None:
        self.tree = dict(trace_map or {})
        super().end_trace(trace_id, trace_map)

    def children(self, event_type: CBEventType) -> list[CBEventType]:
        (pair,) = self.get_event_pairs(event_type)
        kinds = {e.id_: e.event_type for e in self.get_events()}
        return [kinds[c] for c in self.tree.get(pair[0].id_, [])]


class _Events(BaseEventHandler):
    names: list[str] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "RecordingEvents"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.names.append(event.class_name())


@pytest.fixture
def instrumented() -> Iterator[tuple[SimpleSpanHandler, _Events]]:
    root = get_dispatcher()
    spans, events = SimpleSpanHandler(), _Events()
    root.add_span_handler(spans)
    root.add_event_handler(events)
    try:
        yield spans, events
    finally:
        root.span_handlers.remove(spans)
        root.event_handlers.remove(events)


def _engine(calibration: AnswerSetCalibration, debug: _Tree, **synth_kwargs: Any) -> RetrieverQueryEngine:
    cm = CallbackManager([debug])
    retriever = LIRetriever(
        calibration, retriever=_Host(), options=ServingOptions(check_fingerprint=False), callback_manager=cm
    )
    synth = LISynth(llm=MockLLM(max_tokens=2), calibration=calibration, callback_manager=cm, **synth_kwargs)
    return RetrieverQueryEngine(retriever=retriever, response_synthesizer=synth, callback_manager=cm)


def _span_chain(spans: SimpleSpanHandler, leaf_prefix: str) -> list[str]:
    """Names (class.method) from a span whose id starts with ``leaf_prefix`` up to the root."""
    by_id = {s.id_: s for s in spans.completed_spans}
    leaf = next(s for s in spans.completed_spans if s.id_.startswith(leaf_prefix))
    chain = []
    while leaf is not None:
        chain.append(leaf.id_.split("-")[0])
        leaf = by_id.get(leaf.parent_id) if leaf.parent_id else None
    return chain


def _run(mode: str, engine: RetrieverQueryEngine, query: str) -> Any:
    if mode == "sync":
        return engine.query(query)
    if mode == "async":
        return asyncio.run(engine.aquery(query))

    async def in_running_loop() -> Any:  # a notebook cell: sync call while a loop runs
        return engine.query(query)

    return asyncio.run(in_running_loop())


@pytest.mark.parametrize("mode", ["sync", "async", "sync-in-running-loop"])
def test_llamaindex_query_traces_retriever_synthesizer_and_llm(
    toy_calibration: AnswerSetCalibration, instrumented: tuple[SimpleSpanHandler, _Events], mode: str
) -> None:
    spans, events = instrumented
    debug = _Tree(print_trace_on_end=False)
    response = _run(mode, _engine(toy_calibration, debug), "Who led the Norse?")
    assert response.metadata["answer_set"] is not None
    # callback events: the query wraps retrieve and synthesize, and synthesize wraps the LLM calls
    # (2 chunks x M=4 samples; MockLLM reports each call twice, acomplete and the complete it wraps)
    (pair,) = debug.get_event_pairs(CBEventType.SYNTHESIZE)
    assert pair[1].payload["response"] is response
    assert debug.children(CBEventType.QUERY) == [CBEventType.RETRIEVE, CBEventType.SYNTHESIZE]
    llm_calls = debug.children(CBEventType.SYNTHESIZE)
    assert set(llm_calls) == {CBEventType.LLM} and len(llm_calls) >= 8
    # instrumentation events in order, start before end
    names = events.names
    assert names.index("SynthesizeStartEvent") < names.index("SynthesizeEndEvent")
    assert names.count("LLMCompletionStartEvent") >= 8 and names.count("SynthesizeEndEvent") == 1
    # spans: the host retriever under ConformalRetriever, the LLM under the synthesizer, all under the query
    host_chain = _span_chain(spans, "_Host.")
    llm_chain = _span_chain(spans, "MockLLM.")
    verb = "aquery" if mode == "async" else "query"
    above_host = [n for n in host_chain if not n.startswith("_Host.")]
    assert above_host[0].startswith("ConformalRetriever.") and above_host[-1] == f"RetrieverQueryEngine.{verb}"
    above_llm = [n for n in llm_chain if not n.startswith("MockLLM.")]
    synth = "asynthesize" if mode == "async" else "synthesize"
    assert above_llm[0] == f"ConformalAnswerSetSynthesizer.{synth}" and above_llm[-1] == f"RetrieverQueryEngine.{verb}"


def test_llamaindex_streaming_yields_the_answer_with_metadata(toy_calibration: AnswerSetCalibration) -> None:
    engine = _engine(toy_calibration, _Tree(print_trace_on_end=False), streaming=True)
    plain = _engine(toy_calibration, _Tree(print_trace_on_end=False)).query("Who led the Norse?")
    streamed = engine.query("Who led the Norse?")
    assert isinstance(streamed, StreamingResponse)
    assert "".join(streamed.response_gen) == plain.response
    assert streamed.metadata["answer_set"] == plain.metadata["answer_set"]

    async def collect() -> tuple[Any, str]:
        out = await engine.aquery("Who led the Norse?")
        return out, "".join([t async for t in out.response_gen])

    out, text = asyncio.run(collect())
    assert isinstance(out, AsyncStreamingResponse) and text == plain.response


def test_llamaindex_adaptive_synthesizer_is_traced(instrumented: tuple[SimpleSpanHandler, _Events]) -> None:
    spans, events = instrumented
    debug = _Tree(print_trace_on_end=False)
    synth = AdaptiveContextSynthesizer(llm=MockLLM(max_tokens=2), callback_manager=CallbackManager([debug]))
    nodes = _Host().retrieve("Who led the Norse?")
    response = synth.synthesize("Who led the Norse?", nodes)
    assert response.metadata["rounds"] == 1
    assert len(debug.get_event_pairs(CBEventType.SYNTHESIZE)) == 1 and len(debug.get_event_pairs(CBEventType.LLM)) >= 1
    assert events.names.count("SynthesizeStartEvent") == 1
    above_llm = [n for n in _span_chain(spans, "MockLLM.") if not n.startswith("MockLLM.")]
    assert above_llm == ["AdaptiveContextSynthesizer.synthesize"]


def _children(run: Any) -> list[Any]:
    out = []
    for child in run.child_runs:
        out.append(child)
        out.extend(_children(child))
    return out


@pytest.mark.parametrize("mode", ["sync", "async", "sync-in-running-loop"])
def test_langchain_chain_traces_host_retriever_and_model(toy_calibration: AnswerSetCalibration, mode: str) -> None:
    retriever = LCRetriever(
        calibration=toy_calibration, retriever=_LCHost(), options=ServingOptions(check_fingerprint=False)
    )
    synth = LCSynth(llm=FakeListChatModel(responses=["Rollo"]), calibration=toy_calibration)
    chain = {"context": retriever, "question": RunnablePassthrough()} | synth
    collector = RunCollectorCallbackHandler()
    config = {"callbacks": [collector], "tags": ["traced"]}
    if mode == "sync":
        result = chain.invoke("Who led the Norse?", config=config)
    elif mode == "async":
        result = asyncio.run(chain.ainvoke("Who led the Norse?", config=config))
    else:

        async def in_running_loop() -> Any:
            return chain.invoke("Who led the Norse?", config=config)

        result = asyncio.run(in_running_loop())
    assert result.response == "Rollo"
    (root,) = collector.traced_runs
    runs = _children(root)
    conformal = next(r for r in runs if r.name == "ConformalRetriever")
    assert [c.name for c in conformal.child_runs] == ["_LCHost"]  # the host ran as a child of our retriever
    synth_run = next(r for r in runs if r.name == "ConformalAnswerSetSynthesizer")
    models = [c for c in synth_run.child_runs if c.run_type == "llm"]
    assert len(models) == 8 and all("traced" in m.tags for m in models)  # 2 chunks x M=4, config passed on
    assert synth_run.outputs is not None and synth_run.error is None
