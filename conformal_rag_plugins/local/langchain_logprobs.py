"""``LlamaCpp`` whose generations carry llama.cpp's token log-probabilities (needs the ``local`` extra)."""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_community.llms import LlamaCpp
from langchain_core.outputs import Generation, LLMResult
from langchain_core.runnables.config import run_in_executor

from .logprobs import continuation_logprob, model_lock


class LlamaCppWithLogprobs(LlamaCpp):
    """``LlamaCpp`` whose generations report their mean token log-probability.

    ``generation_info["logprobs"]`` (llama.cpp's format), scored from a fixed prompt state so earlier
    calls do not change it (:func:`~conformal_rag_plugins.local.logprobs.continuation_logprob`).
    """

    reports_logprobs: ClassVar[bool] = True

    def _generate(
        self, prompts: list[str], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> LLMResult:
        generations = []
        for prompt in prompts:
            with model_lock(self.client):  # the async path runs here in executor threads: one call at a time
                result = self.client(prompt=prompt, **{**self._get_parameters(stop), **kwargs})
                text = result["choices"][0]["text"]
                logprob = continuation_logprob(self.client, prompt, text)
            info = {"logprobs": None if logprob is None else {"tokens": [text], "token_logprobs": [logprob]}}
            generations.append([Generation(text=text, generation_info=info)])
        return LLMResult(generations=generations)

    async def _agenerate(
        self, prompts: list[str], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> LLMResult:
        # ``LLM._agenerate`` goes through ``_acall`` (text only); keep the logprobs on the async path too
        sync_manager = run_manager.get_sync() if run_manager else None
        return await run_in_executor(None, self._generate, prompts, stop, sync_manager, **kwargs)
