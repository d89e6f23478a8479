"""Question generation and the judge through LlamaIndex and LangChain objects, with fake LLMs (control flow)."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/llm_calls.py
#   conformal_rag_plugins/llamaindex/llm_calls.py

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel, FakeListLLM
from langchain_core.prompts import ChatPromptTemplate as LCChatPrompt
from langchain_core.prompts import PromptTemplate as LCPrompt
from langchain_core.retrievers import BaseRetriever as LCRetriever
from llama_index.core.base.base_retriever import BaseRetriever as LIRetriever
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.prompts import PromptTemplate as LIPrompt
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from pydantic import Field, PrivateAttr

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.labelling.options import QuestionOptions
from conformal_rag_plugins.labelling.prompts import JUDGE_CHAT_SYSTEM, QUESTION_CHAT_SYSTEM
from conformal_rag_plugins.langchain import calibrate_retriever as lc_calibrate
from conformal_rag_plugins.langchain import generate_calibration_questions as lc_generate
from conformal_rag_plugins.langchain import label_with_judge as lc_label
from conformal_rag_plugins.llamaindex import calibrate_retriever as li_calibrate
from conformal_rag_plugins.llamaindex import generate_calibration_questions as li_generate
from conformal_rag_plugins.llamaindex import label_with_judge as li_label
from conformal_rag_plugins.retrieval.options import RetrievalOptions

TEXTS = {
    "n0": "The Normans gave their name to Normandy, a region in northern France.",
    "n1": "Rollo was the Viking leader who founded the duchy of Normandy in 911.",
    "n2": "The Seine is a river that flows through Paris into the English Channel.",
}
QUESTIONS = {
    "n0": '{"question": "Which region was named after the Normans?", "answer": "Normandy"}',
    "n1": '{"question": "Who founded the duchy?", "answer": "Rollo"}',
    "n2": '{"question": "Into which sea does the river flow?", "answer": "English Channel"}',
}


class ScriptedLLM(MockLLM):
    """A LlamaIndex LLM answering from a script keyed by a passage it finds in the prompt."""

    script: dict[str, str] = Field(default_factory=dict)
    fallback: str = "no"
    _prompts: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, script: dict[str, str], fallback: str = "no", is_chat_model: bool = False) -> None:
        super().__init__(is_chat_model=is_chat_model)
        self.script = script
        self.fallback = fallback

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        key = next((k for k in self.script if k in prompt), None)
        return CompletionResponse(text=self.script[key] if key else self.fallback)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.complete(prompt, formatted, **kwargs)


def nodes() -> list[TextNode]:
    out = []
    for i, (nid, text) in enumerate(TEXTS.items()):
        node = TextNode(id_=nid, text=text)
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"doc{i % 2}")
        out.append(node)
    return out


def by_text(questions: dict[str, str]) -> dict[str, str]:
    return {TEXTS[k]: v for k, v in questions.items()}


# --- LlamaIndex ----------------------------------------------------------------------------------------------------


def test_llamaindex_base_model_generates_from_nodes() -> None:
    llm = ScriptedLLM(script=by_text(QUESTIONS))
    examples, report = li_generate(nodes(), llm, 3, cache=False, seed=1)
    assert sorted(ex.gold_ids[0] for ex in examples) == ["n0", "n1", "n2"]
    assert {ex.metadata["source_document_id"] for ex in examples} == {"doc0", "doc1"}  # ref_doc_id
    assert all(ex.metadata["generated_by"] == "ScriptedLLM:None" for ex in examples)
    assert report.n_generated == 3 and report.llm_calls == 3
    assert all(p.rstrip().endswith("JSON:") for p in llm._prompts)  # the few-shot completion prompt


def test_llamaindex_chat_model_gets_the_chat_prompt() -> None:
    llm = ScriptedLLM(script=by_text(QUESTIONS), is_chat_model=True)
    examples, _ = li_generate(nodes()[:1], llm, 1, cache=False, topic="geography")
    assert examples[0].answers == ("Normandy",)
    (prompt,) = llm._prompts  # MockLLM's chat() renders the messages into one prompt
    assert QUESTION_CHAT_SYSTEM in prompt and "The question must be about geography." in prompt


def test_llamaindex_prompt_override_and_unknown_variable() -> None:
    llm = ScriptedLLM(script=by_text(QUESTIONS))
    quiz = QuestionOptions(completion_prompt=LIPrompt("Quiz on: {context}\nJSON:"))
    li_generate(nodes()[:1], llm, 1, cache=False, options=quiz)
    assert llm._prompts == [f"Quiz on: {TEXTS['n0']}\nJSON:"]
    with pytest.raises(ConformalError, match="Unknown prompt variable"):
        li_generate(nodes(), llm, 1, cache=False, options=QuestionOptions(completion_prompt=LIPrompt("{passage}")))


def test_llamaindex_cache_resume(tmp_path) -> None:
    llm = ScriptedLLM(script=by_text(QUESTIONS))
    first, _ = li_generate(nodes(), llm, 2, cache=tmp_path / "c.sqlite")
    llm2 = ScriptedLLM(script=by_text(QUESTIONS))
    second, report = li_generate(nodes(), llm2, 2, cache=tmp_path / "c.sqlite")
    assert llm2._prompts == [] and report.cache_hits == 2 and first == second


class FixedRetriever(LIRetriever):
    """Returns every node, scored by a fixed order (best first)."""

    def __init__(self, order: list[str]) -> None:
        super().__init__()
        self.order = order

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(id_=nid, text=TEXTS[nid]), score=1.0 - 0.1 * i)
            for i, nid in enumerate(self.order)
        ]


def test_llamaindex_judge_walks_the_retriever_and_feeds_calibration() -> None:
    examples, _ = li_generate(nodes(), ScriptedLLM(script=by_text(QUESTIONS)), 3, cache=False)
    judge = ScriptedLLM(script={f"Passage: {TEXTS['n2']}\n": " yes"}, fallback=" no")  # n2 holds every answer
    host = FixedRetriever(["n0", "n2", "n1"])
    labelled, report = li_label(host, examples, judge, budget=5, pool_size=3, cache=False)
    by_source = {ex.metadata["source_chunk_id"]: ex for ex in labelled}
    assert by_source["n0"].metadata["label_rule"] == "source" and by_source["n0"].metadata["judge_calls"] == 0
    assert by_source["n2"].metadata["label_rule"] == "source" and by_source["n2"].metadata["judge_calls"] == 1
    assert by_source["n1"].gold_ids == ("n2",) and by_source["n1"].metadata["label_rule"] == "judge"
    assert report.by_source == 2 and report.by_judge == 1 and report.judge_calls == 3
    assert by_source["n1"].metadata["judge_model"] == "ScriptedLLM:None"
    calibration = li_calibrate(
        host,
        labelled,
        confidence_level=0.5,
        pool_size=3,
        options=RetrievalOptions(progress=False),
    )
    assert calibration.n_calibration_ == 3


# --- LangChain -----------------------------------------------------------------------------------------------------


def documents() -> list[Document]:
    return [Document(text, id=i, metadata={"source": f"file{n % 2}.txt"}) for n, (i, text) in enumerate(TEXTS.items())]


def test_langchain_completion_model_generates_from_documents() -> None:
    llm = FakeListLLM(responses=["garbage", QUESTIONS["n0"]])
    examples, report = lc_generate(documents()[:1], llm, 1, cache=False)
    assert examples[0].gold_ids == ("n0",) and examples[0].metadata["source_document_id"] == "file0.txt"
    assert examples[0].metadata["generation_attempt"] == 1 and report.rejected == {"not_json": 1}
    assert examples[0].metadata["generated_by"] == "FakeListLLM:None"


def test_langchain_chat_model_and_prompt_overrides() -> None:
    chat = FakeListChatModel(responses=[f"```json\n{QUESTIONS['n1']}\n```"])
    examples, _ = lc_generate([CorpusEntry("n1", TEXTS["n1"])], chat, 1, cache=False)
    assert examples[0].question == "Who founded the duchy?"

    prompt = LCChatPrompt.from_messages([("human", 'Passage: {context}. Answer as {{"question": "..."}}')])
    rendered = prompt.format_messages(context="x")
    assert rendered[0].content == 'Passage: x. Answer as {"question": "..."}'
    examples, _ = lc_generate(documents()[1:2], FakeListChatModel(responses=[QUESTIONS["n1"]]), 1, cache=False,
                              options=QuestionOptions(chat_prompt=prompt))  # fmt: skip
    assert examples[0].answers == ("Rollo",)
    with pytest.raises(ConformalError, match="Unknown prompt variable"):
        lc_generate(documents(), FakeListLLM(responses=["x"]), 1, cache=False,
                    options=QuestionOptions(completion_prompt=LCPrompt.from_template("{passage}")))  # fmt: skip


def test_an_llm_of_the_other_framework_is_refused() -> None:
    with pytest.raises(ConformalError, match="LangChain"):
        lc_generate(documents(), MockLLM(), 1, cache=False)
    with pytest.raises(ConformalError, match="LlamaIndex"):
        li_generate(nodes(), FakeListLLM(responses=["x"]), 1, cache=False)


def test_langchain_documents_need_ids() -> None:
    with pytest.raises(ConformalError, match="no id"):
        lc_generate([Document(TEXTS["n0"])], FakeListLLM(responses=["x"]), 1, cache=False)


class ScoredRetriever(LCRetriever):
    """Every document, with ``metadata['score']`` in a fixed order."""

    order: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(TEXTS[i], id=i, metadata={"score": 1.0 - 0.1 * k}) for k, i in enumerate(self.order)]


def test_langchain_judge_over_a_scored_retriever_feeds_calibration() -> None:
    examples, _ = lc_generate(documents(), FakeListLLM(responses=[QUESTIONS[k] for k in ("n0", "n1", "n2")] * 2), 3,
                              cache=False, seed=3)  # fmt: skip
    assert len(examples) >= 1
    host = ScoredRetriever(order=["n2", "n1", "n0"])
    chat_judge = FakeListChatModel(responses=["Maybe."])  # never yes/no: every judged chunk is unparseable
    labelled, report = lc_label(host, examples, chat_judge, budget=1, cache=False)
    assert len(labelled) == len(examples)
    # n2 ranks first (source, no call); n1 is reached right after the one judged chunk; n0 is beyond the budget
    expected = {"n2": ("source", 0), "n1": ("source", 1), "n0": ("budget-exhausted", 1)}
    for ex in labelled:
        source = ex.metadata["source_chunk_id"]
        assert (ex.metadata["label_rule"], ex.metadata["judge_calls"]) == expected[source]
        assert ex.gold_ids == (source,)
    assert report.unparseable == report.judge_calls == sum(ex.metadata["source_chunk_id"] != "n2" for ex in labelled)
    calibration = lc_calibrate(
        host,
        labelled,
        confidence_level=0.5,
        pool_size=3,
        options=RetrievalOptions(progress=False),
    )
    assert calibration.n_calibration_ == len(labelled)


def test_langchain_chat_judge_sees_the_chat_prompt(tmp_path) -> None:
    seen: list[Any] = []

    class Recording(FakeListChatModel):
        async def ainvoke(self, value: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(value)
            return await super().ainvoke(value, *args, **kwargs)

    host = ScoredRetriever(order=["n1", "n0"])
    examples, _ = lc_generate(documents()[:1], FakeListLLM(responses=[QUESTIONS["n0"]]), 1, cache=False)
    labelled, report = lc_label(host, examples, Recording(responses=["Yes"]), budget=3, cache=tmp_path / "j.sqlite")
    assert labelled[0].gold_ids == ("n1",) and labelled[0].metadata["label_rule"] == "judge"
    assert seen[0][0].content == JUDGE_CHAT_SYSTEM and TEXTS["n1"] in seen[0][1].content
    assert report.llm_calls == 1
    json.dumps([ex.to_dict() for ex in labelled])  # JSON-ready
