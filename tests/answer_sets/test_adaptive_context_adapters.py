"""Both frameworks' AdaptiveContextSynthesizer with fake LLMs that only answer once the context holds the fact."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/adaptive_chain.py
#   conformal_rag_plugins/llamaindex/adaptive_synthesizer.py
#   conformal_rag_plugins/runtime/retry.py

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel, FakeListLLM
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.language_models.llms import LLM
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import MockLLM
from llama_index.core.llms.custom import CustomLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field

from conformal_rag_plugins import AdaptiveSchedule, SamplingOptions
from conformal_rag_plugins.answer_sets.adaptive_context import approx_token_count
from conformal_rag_plugins.answer_sets.prompts import FEW_SHOT_TEMPLATE
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.langchain import AdaptiveContextSynthesizer as LCAdaptive
from conformal_rag_plugins.llamaindex import AdaptiveContextSynthesizer as LIAdaptive

QUESTION = "Who led the Norse?"
KEYWORD = "Rollo"
TEXTS = [
    "Paris is the capital of France.",
    "The Seine flows through Paris.",
    "Normandy is a region of France.",
    "The Vikings raided the coasts.",
    "Rollo led the Norse who settled in Normandy.",  # rank 5: found in round 4 (8 chunks)
    "Bayeux has a tapestry.",
    "Rouen is on the Seine.",
    "The duchy grew in the tenth century.",
    "Far away.",
    "Unrelated text.",
]
SCORES = [0.95 - 0.05 * i for i in range(len(TEXTS))]


def _context_of(prompt: str) -> str:
    """The last ``Context:`` block of a few-shot prompt (the one the question is about)."""
    return prompt.rsplit("Context: ", 1)[-1].split("\nQuestion:", 1)[0]


# ---------------------------------------------------------------- LlamaIndex


class KeywordLLM(CustomLLM):
    """Says "I don't know" until the prompt's context holds the keyword; reports usage like llama-cpp."""

    keyword: str = KEYWORD
    chat_model: bool = False
    report_usage: bool = True
    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=self.chat_model, model_name="keyword-fake")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        text = f" {self.keyword}\n" if self.keyword in _context_of(prompt) else " I don't know\n"
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 2}
        return CompletionResponse(text=text, raw={"usage": usage} if self.report_usage else None)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted, **kwargs)


class ListRetriever(BaseRetriever):
    """Returns fixed scored nodes in a shuffled order (the synthesizer must sort them)."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        super().__init__()
        self._nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        shuffled = list(self._nodes)
        random.Random(0).shuffle(shuffled)
        return shuffled


def _nodes(texts: list[str] = TEXTS) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=s)
        for i, (t, s) in enumerate(zip(texts, SCORES, strict=False))
    ]


def test_llamaindex_query_engine_grows_the_context_until_the_answer() -> None:
    llm = KeywordLLM(prompts=[])
    synth = LIAdaptive(llm=llm)
    engine = RetrieverQueryEngine.from_args(retriever=ListRetriever(_nodes()), llm=llm, response_synthesizer=synth)
    response = engine.query(QUESTION)
    meta = response.metadata
    assert response.response == KEYWORD
    assert meta["schedule"] == [1, 2, 4, 8, 10]
    assert meta["rounds"] == meta["llm_calls"] == len(llm.prompts) == 4
    assert meta["chunks_used"] == 8 and meta["set_size"] == 10 and meta["abstained"] is False
    assert meta["round_answers"] == ["I don't know"] * 3 + [KEYWORD]
    # overlapping prompts in score order: round r shows exactly the top schedule[r] chunks
    for size, prompt in zip(meta["schedule"], llm.prompts, strict=False):
        assert _context_of(prompt) == "\n".join(TEXTS[:size])
        assert prompt.startswith(FEW_SHOT_TEMPLATE.split("{context}")[0])  # base model: few-shot prompt
    # tokens are the LLM's reported usage, summed over rounds
    assert meta["token_source"] == "reported"
    assert meta["prompt_tokens"] == sum(len(p.split()) for p in llm.prompts)
    assert meta["completion_tokens"] == 2 * 4
    # the answer's lineage: the nodes of the final context, best first
    assert [n.node.node_id for n in response.source_nodes] == [f"n{i}" for i in range(8)]
    assert meta["chunk_ids"] == [f"n{i}" for i in range(8)]


def test_llamaindex_abstains_after_showing_the_whole_set() -> None:
    llm = KeywordLLM(prompts=[], keyword="Charlemagne")
    engine = RetrieverQueryEngine(retriever=ListRetriever(_nodes()), response_synthesizer=LIAdaptive(llm=llm))
    response = asyncio.run(engine.aquery(QUESTION))
    meta = response.metadata
    assert response.response == "I don't know" and meta["abstained"] is True
    assert meta["rounds"] == 5 and meta["chunks_used"] == 10
    assert _context_of(llm.prompts[-1]) == "\n".join(TEXTS)
    assert len(response.source_nodes) == 10


def test_llamaindex_empty_set_is_an_explicit_abstention_with_no_call() -> None:
    llm = KeywordLLM(prompts=[])
    synth = LIAdaptive(llm=llm)
    response = synth.synthesize(QUESTION, [])
    assert response.response == "I don't know" != "Empty Response"
    assert response.metadata["llm_calls"] == 0 and response.metadata["abstained"] is True
    assert response.metadata["schedule"] == [] and llm.prompts == []


def test_llamaindex_approximate_tokens_without_usage_and_max_rounds() -> None:
    llm = KeywordLLM(prompts=[], report_usage=False)
    synth = LIAdaptive(llm=llm, schedule=AdaptiveSchedule(initial=2, factor=3.0, max_rounds=2))
    response = synth.synthesize(QUESTION, _nodes())
    meta = response.metadata
    assert meta["schedule"] == [2, 10] and meta["rounds"] == 2 and response.response == KEYWORD
    assert meta["token_source"] == "approximate"
    assert meta["prompt_tokens"] == sum(approx_token_count(p) for p in llm.prompts)
    assert meta["completion_tokens"] == approx_token_count("I don't know") + approx_token_count(KEYWORD)


def test_llamaindex_chat_model_gets_the_chat_prompt() -> None:
    llm = KeywordLLM(prompts=[], chat_model=True)
    synth = LIAdaptive(llm=llm)
    assert synth.sampler.is_chat
    response = synth.synthesize(QUESTION, _nodes())
    assert response.response == KEYWORD and response.metadata["rounds"] == 4
    assert "You answer questions using only the given context" in llm.prompts[0]


def test_llamaindex_prompts_override_mockllm_and_validation(tmp_path) -> None:
    from llama_index.core.prompts import PromptTemplate

    cache = SampleCache(tmp_path / "c.sqlite")
    synth = LIAdaptive(llm=MockLLM(max_tokens=2), sampling=SamplingOptions(n_samples=10, cache=cache))
    assert synth.sampler.cache is cache and synth.sampler.max_concurrency == 1
    assert set(synth.get_prompts()) == {"completion_prompt", "chat_prompt"}
    synth.update_prompts({"completion_prompt": PromptTemplate("C: {context}\nQ: {question}\nA:")})
    assert synth.sampler.completion_prompt.get_template().startswith("C: ")
    assert synth.sampler.n_samples == 1
    # MockLLM echoes "text" tokens: a real answer at round one, with approximate token counts
    response = synth.synthesize(QUESTION, _nodes())
    assert response.response == "text text" and response.metadata["rounds"] == 1
    assert response.metadata["token_source"] == "approximate"
    assert response.metadata["prompt_tokens"] == approx_token_count(f"C: {TEXTS[0]}\nQ: {QUESTION}\nA:")
    assert synth.get_response(QUESTION, ["a", "b"]) == "text text"
    with pytest.raises(ConformalError, match="factor must be"):
        LIAdaptive(llm=MockLLM(), schedule=AdaptiveSchedule(factor=1.0))
    with pytest.raises(ConformalError, match="initial must be"):
        LIAdaptive(llm=MockLLM(), schedule=AdaptiveSchedule(initial=0))


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_moved_keywords_name_their_option_object(framework: str) -> None:
    cls, llm = (LIAdaptive, MockLLM()) if framework == "llamaindex" else (LCAdaptive, FakeListLLM(responses=["x"]))
    with pytest.raises(TypeError, match=r"schedule=AdaptiveSchedule\(initial=2, factor=3\.0\)"):
        cls(llm=llm, initial=2, factor=3.0)
    with pytest.raises(ConformalError, match=r"sampling=SamplingOptions\(timeout=5\.0\)"):
        cls(llm=llm, timeout=5.0)
    synth = cls(llm=llm, sampling=SamplingOptions(timeout=5.0, retries=0), schedule=AdaptiveSchedule(factor=3.0))
    assert (synth.sampler.timeout, synth.sampler.retries, synth.sampler.n_samples) == (5.0, 0, 1)
    assert synth.schedule == AdaptiveSchedule(factor=3.0)


# ---------------------------------------------------------------- LangChain


class KeywordCompletionLLM(LLM):
    """Completion LLM: "I don't know" until the context holds the keyword; optional usage and tokenizer."""

    keyword: str = KEYWORD
    usage: bool = False
    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "keyword-fake"

    def _call(self, prompt: str, stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> str:
        self.prompts.append(prompt)
        return f" {self.keyword}\n" if self.keyword in _context_of(prompt) else " I don't know\n"

    def _with_usage(self, result: LLMResult) -> LLMResult:
        if not self.usage:
            return result
        used = {"prompt_tokens": 11, "completion_tokens": 2}
        return LLMResult(generations=result.generations, llm_output={"token_usage": used})

    def _generate(self, prompts: list[str], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> LLMResult:
        return self._with_usage(super()._generate(prompts, stop, run_manager, **kwargs))

    async def _agenerate(
        self, prompts: list[str], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> LLMResult:
        return self._with_usage(await super()._agenerate(prompts, stop, run_manager, **kwargs))


class TokenizingLLM(KeywordCompletionLLM):
    """Has its own tokenizer (like llama-cpp's LlamaCpp): one token per word."""

    def get_num_tokens(self, text: str) -> int:
        return len(text.split())


def _docs() -> list[Document]:
    docs = [
        Document(id=f"d{i}", page_content=t, metadata={"score": s})
        for i, (t, s) in enumerate(zip(TEXTS, SCORES, strict=True))
    ]
    random.Random(1).shuffle(docs)
    return docs


def test_langchain_lcel_chain_after_a_retriever() -> None:
    llm = KeywordCompletionLLM(prompts=[])
    chain = {"documents": RunnableLambda(lambda _q: _docs()), "question": RunnablePassthrough()} | LCAdaptive(llm=llm)
    result = chain.invoke(QUESTION)
    assert result.answer == KEYWORD and not result.abstained
    assert result.rounds == result.llm_calls == len(llm.prompts) == 4
    assert result.schedule == [1, 2, 4, 8, 10] and result.chunks_used == 8
    assert result.chunk_ids == [f"d{i}" for i in range(8)]  # sorted by score, best first
    for size, prompt in zip(result.schedule, llm.prompts, strict=False):
        assert _context_of(prompt) == "\n".join(TEXTS[:size])
    # no usage and no own tokenizer: approximate counts on the formatted prompts
    assert result.token_source == "approximate"
    assert result.prompt_tokens == sum(approx_token_count(p) for p in llm.prompts)


def test_langchain_usage_from_llm_output_and_async() -> None:
    llm = KeywordCompletionLLM(prompts=[], usage=True)
    synth = LCAdaptive(llm=llm)
    result = asyncio.run(synth.ainvoke({"question": QUESTION, "context": _docs()}))  # "context" works too
    assert result.answer == KEYWORD and result.rounds == 4
    assert result.token_source == "reported"
    assert result.prompt_tokens == 4 * 11 and result.completion_tokens == 4 * 2


def test_langchain_own_tokenizer_counts() -> None:
    llm = TokenizingLLM(prompts=[])
    result = LCAdaptive(llm=llm, schedule=AdaptiveSchedule(initial=4)).invoke(
        {"question": QUESTION, "documents": _docs()}
    )
    assert result.schedule == [4, 8, 10] and result.rounds == 2
    assert result.token_source == "tokenizer"
    assert result.prompt_tokens == sum(len(p.split()) for p in llm.prompts)
    assert result.completion_tokens == 3 + 1  # "I don't know" then "Rollo"


def test_langchain_chat_model_usage_metadata() -> None:
    messages = [
        AIMessage(content="I don't know", usage_metadata={"input_tokens": 40, "output_tokens": 3, "total_tokens": 43}),
        AIMessage(content="Rollo", usage_metadata={"input_tokens": 60, "output_tokens": 1, "total_tokens": 61}),
    ]
    synth = LCAdaptive(llm=GenericFakeChatModel(messages=iter(messages)))
    result = synth.invoke({"question": QUESTION, "documents": _docs()})
    assert result.answer == "Rollo" and result.round_answers == ["I don't know", "Rollo"]
    assert (result.prompt_tokens, result.completion_tokens, result.token_source) == (100, 4, "reported")


def test_langchain_abstention_and_empty_set() -> None:
    llm = FakeListChatModel(responses=["I don't know", "Not in the context.", "N/A", "unknown", "None"])
    result = LCAdaptive(llm=llm).invoke({"question": QUESTION, "documents": _docs()})
    assert result.abstained and result.answer == "I don't know"
    assert result.rounds == 5 and result.chunks_used == 10 and len(result.chunk_ids) == 10
    empty = LCAdaptive(llm=FakeListLLM(responses=["x"])).invoke({"question": QUESTION, "documents": []})
    assert empty.abstained and empty.llm_calls == 0 and empty.schedule == []


def test_langchain_bad_input() -> None:
    synth = LCAdaptive(llm=FakeListLLM(responses=["x"]))
    with pytest.raises(ConformalError, match="question"):
        synth.invoke({"documents": []})
    with pytest.raises(ConformalError, match="max_rounds must be"):
        LCAdaptive(llm=FakeListLLM(responses=["x"]), schedule=AdaptiveSchedule(max_rounds=0))
    # plain strings are accepted as documents, kept in the given order
    result = LCAdaptive(llm=FakeListLLM(responses=["Rollo"])).invoke({"question": "q", "documents": ["a", "b"]})
    assert result.answer == "Rollo" and result.chunk_ids == ["doc-0"]
