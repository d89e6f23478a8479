"""Default LangChain model: OpenAI(-compatible) when configured, else local Gemma 3 270M."""

from __future__ import annotations

from typing import Any

from ..local.llm import gemma_model_path
from ..runtime.openai_settings import completion_mode, openai_settings


def local_llm(temperature: float = 1.0, max_tokens: int = 24, n_threads: int = 2, *, logprobs: bool = False) -> Any:
    """``langchain_community`` ``LlamaCpp`` over the bundled Gemma 3 270M base model.

    ``logprobs=True`` returns a :class:`~.llamacpp_logprobs.LlamaCppWithLogprobs` whose generations
    report their mean token log-probability (for the ``"likelihood"`` generator score), scored on the
    cached prompt at a few milliseconds per token.

    Examples
    --------
    >>> llm = local_llm()  # doctest: +SKIP
    """
    from langchain_community.llms import LlamaCpp

    from .llamacpp_logprobs import LlamaCppWithLogprobs

    cls = LlamaCppWithLogprobs if logprobs else LlamaCpp
    return cls(
        model_path=str(gemma_model_path()),
        temperature=temperature,
        max_tokens=max_tokens,
        n_ctx=2048,
        n_batch=512,  # LlamaCpp's default of 8 tokens per batch makes prompt evaluation several times slower
        n_threads=n_threads,
        stop=["\n"],
        verbose=False,
    )


def default_llm(temperature: float = 1.0) -> Any:
    """The model to sample answers from, chosen by environment variables.

    - No ``OPENAI_API_KEY``: :func:`local_llm` (offline Gemma 3 270M).
    - ``OPENAI_API_KEY`` set: ``ChatOpenAI`` against ``OPENAI_BASE_URL`` (any OpenAI-compatible
      server, e.g. ``http://127.0.0.1:8000/v1`` for vLLM or llama-cpp-python's server; the official
      API when unset), model ``CONFORMAL_RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``; must match the
      name the server serves). It uses ``/v1/chat/completions`` and the chat prompt.
    - ``CONFORMAL_RAG_OPENAI_COMPLETION=1`` (also ``true``/``yes``/``on``): ``langchain_openai.OpenAI``
      instead (``/v1/completions``, the few-shot prompt, stop at a newline). Use it for base models,
      which have no chat template.
    """
    cfg = openai_settings()
    if cfg is None:
        return local_llm(temperature)
    common: dict[str, Any] = {
        "model": cfg["model"],
        "api_key": cfg["api_key"],
        "base_url": cfg.get("base_url"),
        "temperature": temperature,
        "max_tokens": 32,
        "timeout": 60.0,
        "max_retries": 1,  # the samplers retry with backoff themselves
    }
    if completion_mode():
        from langchain_openai import OpenAI

        return OpenAI(**common, model_kwargs={"stop": ["\n"]})
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(**common)
