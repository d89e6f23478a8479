"""Sample-replay LLMs for both frameworks (fixtures): they return cached real Gemma 3 270M samples.

``benchmarks/data/squad_gemma_pool_samples.jsonl`` holds, for 200 SQuAD questions, ``M = 6``
answers sampled at temperature 1.0 from the local Gemma 3 270M for every chunk of the dense
top-6 pool of both frameworks and for the gold chunk. The replay models parse the question and
the context out of the few-shot prompt and return those answers in their sampled order, so
the synthesizers and ``calibrate_answer_sets`` run unchanged on real model outputs. A request
for a (question, chunk) that was never sampled is recorded in ``unknown`` (the test asserts
there is none) instead of being answered with something made up.

Each answer also carries Gemma's mean token log-probability given the prompt
(``benchmarks/score_logprobs.py``, teacher forcing), and the replay models report it the way
llama.cpp does (``choices[0].logprobs.token_logprobs`` for LlamaIndex, ``generation_info``
for LangChain), so the ``"likelihood"`` generator score runs through the samplers' real parsing.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.llms import LLM
from langchain_core.outputs import Generation, LLMResult
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import PrivateAttr

SAMPLES = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "squad_gemma_pool_samples.jsonl"


def load_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line]


class ReplayTable:
    """``(question, context) -> the M sampled answers and their logprobs``, replayed in order, thread-safe."""

    def __init__(self, rows: list[dict[str, Any]], texts: dict[str, str]) -> None:
        self.table = {
            (row["question"].strip(), texts[cid].strip()): list(
                zip(answers, row.get("logprobs", {}).get(cid, [None] * len(answers)), strict=True)
            )
            for row in rows
            for cid, answers in row["samples"].items()
        }
        self.calls: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.unknown: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    @staticmethod
    def parse(prompt: str) -> tuple[str, str]:
        head, _, question = prompt.rpartition("\nQuestion: ")
        context = head.rpartition("Context: ")[2]
        return question.removesuffix("Answer:").strip(), context.strip()

    def next(self, prompt: str) -> tuple[str, float | None]:
        key = self.parse(prompt)
        with self._lock:
            answers = self.table.get(key)
            if answers is None:
                self.unknown.append(key)
                return "", None
            i = self.calls[key]
            self.calls[key] = i + 1
        return answers[i % len(answers)]


def llama_cpp_payload(text: str, logprob: float | None) -> dict[str, Any]:
    """A completion as llama.cpp reports it (one pseudo-token carrying the mean log-probability)."""
    logprobs = None if logprob is None else {"tokens": [text], "token_logprobs": [logprob]}
    return {"choices": [{"text": text, "logprobs": logprobs}]}


class LlamaIndexReplay(CustomLLM):
    """A LlamaIndex completion LLM that replays the cached samples."""

    model: str = "replay:gemma-3-270m-q4_k_m"
    temperature: float = 1.0
    _table: ReplayTable = PrivateAttr()

    def __init__(self, table: ReplayTable, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._table = table

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=False)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text, logprob = self._table.next(prompt)
        return CompletionResponse(text=" " + text, raw=llama_cpp_payload(" " + text, logprob))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise NotImplementedError("The replay LLM does not stream.")


class LangChainReplay(LLM):
    """A LangChain completion LLM that replays the cached samples."""

    model: str = "replay:gemma-3-270m-q4_k_m"
    temperature: float = 1.0
    table: Any = None

    @property
    def _llm_type(self) -> str:
        return "replay"

    def _call(self, prompt: str, stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> str:
        return " " + self.table.next(prompt)[0]

    def _generate(self, prompts: list[str], stop=None, run_manager: Any = None, **kwargs: Any) -> LLMResult:
        out = []
        for prompt in prompts:
            text, logprob = self.table.next(prompt)
            payload = llama_cpp_payload(" " + text, logprob)["choices"][0]
            out.append([Generation(text=payload["text"], generation_info={"logprobs": payload["logprobs"]})])
        return LLMResult(generations=out)

    async def _agenerate(self, prompts: list[str], stop=None, run_manager: Any = None, **kwargs: Any) -> LLMResult:
        return self._generate(prompts, stop, None, **kwargs)


@pytest.fixture(scope="session")
def replay_rows() -> list[dict[str, Any]]:
    """The 200 rows of cached samples."""
    return load_rows()


@pytest.fixture(scope="session")
def replay_table(replay_rows, squad_entries) -> ReplayTable:
    """One replay table over the cached samples (calls counted across the session)."""
    return ReplayTable(replay_rows, {e.id: e.text for e in squad_entries})


@pytest.fixture(scope="session")
def li_replay_llm(replay_table) -> LlamaIndexReplay:
    return LlamaIndexReplay(replay_table)


@pytest.fixture(scope="session")
def lc_replay_llm(replay_table) -> LangChainReplay:
    return LangChainReplay(table=replay_table)


@pytest.fixture(scope="session")
def long_hybrid_stack(chroma_memory_client):
    """``long_hybrid_stack(framework)`` -> (ChunkedCorpus, {FusionConfig: HostBundle}, {config key: observations}).

    The bundled paragraphs joined into 199 long documents, chunked with ``framework``'s splitter, indexed
    once and queried once per fusion setting of the hybrid grid; shared by the long-document and
    recall-control tests (built once per framework and session, about 15 s).
    """
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
    from conformal_rag_plugins.commands.hosts import build_hosts
    from conformal_rag_plugins.local.long_documents import bundled_long_documents
    from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

    cache: dict = {}

    def get(framework: str):
        if framework not in cache:
            docs, questions = bundled_long_documents()
            chunked = chunk_corpus(framework, docs, questions)
            bundles = build_hosts(framework, "hybrid", chunked.chunks, client=chroma_memory_client)
            obs = {c.key: collect_observations(chunked.questions, b.fetch, progress=False) for c, b in bundles.items()}
            cache[framework] = (chunked, bundles, obs)
        return cache[framework]

    return get
