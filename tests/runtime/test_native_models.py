"""A llama.cpp model is called one at a time: concurrent draws on one context abort the process.

The fake LLM records how many of its calls overlap (LangChain runs ``ainvoke`` of an ``LLM`` in executor
threads, as it does for ``LlamaCpp``). Its ``client`` is a llama.cpp model by module name only.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.language_models.llms import LLM

from conformal_rag_plugins.langchain.answer_sampler import LangChainSampler
from conformal_rag_plugins.runtime.native_models import native_llama


def _client_class(module: str) -> type:
    return type("Llama", (), {"__module__": module})


class OverlapLLM(LLM):
    """Sleeps in every call and records the largest number of calls running at once."""

    client: Any = None
    running: int = 0
    most: int = 0

    @property
    def _llm_type(self) -> str:
        return "overlap"

    def _call(self, prompt: str, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        with _LOCK:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05)
        with _LOCK:
            self.running -= 1
        return "Rollo"


_LOCK = threading.Lock()


@pytest.mark.parametrize(("module", "serial"), [("llama_cpp.llama", True), ("some_server.client", False)])
def test_draws_on_a_llama_cpp_model_never_overlap(module: str, serial: bool) -> None:
    llm = OverlapLLM(client=_client_class(module)())
    sampler = LangChainSampler(llm, n_samples=6, max_concurrency=6)
    samples = asyncio.run(sampler.asample("Who led the Normans?", "Rollo led them."))
    assert [s.text for s in samples] == ["Rollo"] * 6
    assert (llm.most == 1) is serial  # the other model is drawn concurrently: the check can fail


def test_native_llama_finds_the_model_behind_either_framework() -> None:
    native = _client_class("llama_cpp.llama")()
    assert native_llama(type("LangChainLlamaCpp", (), {"client": native})()) is native
    assert native_llama(type("LlamaIndexLlamaCPP", (), {"_model": native})()) is native
    assert native_llama(OverlapLLM(client=_client_class("openai")())) is None
