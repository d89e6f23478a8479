"""``LlamaCPP`` whose completions report their mean token log-probability (needs the ``local`` extra)."""

from __future__ import annotations

from typing import Any, ClassVar

from llama_index.core.base.llms.types import CompletionResponse
from llama_index.llms.llama_cpp import LlamaCPP

from .logprobs import continuation_logprob, model_lock


class LlamaCPPWithLogprobs(LlamaCPP):
    """``LlamaCPP`` that adds ``choices[0].logprobs`` (llama.cpp's format) to each completion's ``raw``.

    The mean token log-probability given the prompt, scored from a fixed prompt state so earlier
    calls do not change it (:func:`~conformal_rag_plugins.local.logprobs.continuation_logprob`).
    """

    reports_logprobs: ClassVar[bool] = True

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        full = prompt if formatted else self.completion_to_prompt(prompt)
        with model_lock(self._model):  # no other thread's call between the completion and its score
            response = super().complete(full, formatted=True, **kwargs)
            logprob = continuation_logprob(self._model, full, response.text)
        raw = dict(response.raw or {})
        choices = [dict(c) for c in raw.get("choices") or [{"text": response.text}]]
        choices[0]["logprobs"] = None if logprob is None else {"tokens": [response.text], "token_logprobs": [logprob]}
        raw["choices"] = choices
        return CompletionResponse(text=response.text, raw=raw, additional_kwargs=response.additional_kwargs)
