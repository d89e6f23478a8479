"""``LlamaCpp`` whose generations carry llama.cpp's token log-probabilities (needs the ``local`` extra)."""

from __future__ import annotations

from typing import Any

from langchain_community.llms import LlamaCpp
from langchain_core.outputs import Generation, LLMResult
from langchain_core.runnables.config import run_in_executor

__all__ = ["LlamaCppWithLogprobs"]


class LlamaCppWithLogprobs(LlamaCpp):
    """``langchain_community`` ``LlamaCpp`` that keeps ``choices[0].logprobs`` in ``generation_info``.

    The stock class returns only the text of a non-streaming completion, so the
    ``"likelihood"`` generator score cannot see the model's own log-probabilities. Build it
    with ``logits_all=True, logprobs=1`` (as :func:`~.llm.local_llm` does with
    ``logprobs=True``).
    """

    def _generate(
        self, prompts: list[str], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> LLMResult:
        generations = []
        for prompt in prompts:
            result = self.client(prompt=prompt, **{**self._get_parameters(stop), **kwargs})
            choice = result["choices"][0]
            generations.append([Generation(text=choice["text"], generation_info={"logprobs": choice.get("logprobs")})])
        return LLMResult(generations=generations)

    async def _agenerate(
        self, prompts: list[str], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> LLMResult:
        # ``LLM._agenerate`` goes through ``_acall`` (text only); keep the logprobs on the async path too
        sync_manager = run_manager.get_sync() if run_manager else None
        return await run_in_executor(None, self._generate, prompts, stop, sync_manager, **kwargs)
