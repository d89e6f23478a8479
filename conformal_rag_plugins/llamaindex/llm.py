"""Default LlamaIndex LLM: OpenAI(-compatible) when configured, else local Gemma 3 270M."""

from __future__ import annotations

from typing import Any

from ..local.llm import gemma_model_path
from ..runtime.openai_settings import completion_mode, openai_settings


def local_llm(
    temperature: float = 1.0,
    max_new_tokens: int = 24,
    n_threads: int = 2,
    n_ctx: int = 2048,
    *,
    logprobs: bool = False,
) -> Any:
    """``LlamaCPP`` over the bundled Gemma 3 270M base model, stopping at a newline.

    ``n_ctx`` is the context window in tokens (prompt plus answer); raise it for prompts with many
    chunks (Gemma 3 270M was trained up to 32k tokens; the KV cache grows with it).
    ``logprobs=True`` returns a :class:`~.llamacpp_logprobs.LlamaCPPWithLogprobs`, whose completions
    report their mean token log-probability (scored on the cached prompt, a few milliseconds per
    token), which the ``"likelihood"`` generator score needs.

    Examples
    --------
    >>> llm = local_llm()  # doctest: +SKIP
    >>> llm.metadata.is_chat_model  # doctest: +SKIP
    False
    """
    from llama_index.llms.llama_cpp import LlamaCPP

    from .llamacpp_logprobs import LlamaCPPWithLogprobs

    return (LlamaCPPWithLogprobs if logprobs else LlamaCPP)(
        model_path=str(gemma_model_path()),
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        context_window=n_ctx,
        generate_kwargs={"stop": ["\n"]},
        model_kwargs={"n_threads": n_threads, "n_ctx": n_ctx},
        verbose=False,
    )


def default_llm(temperature: float = 1.0) -> Any:
    """The LLM to sample answers from, chosen by environment variables.

    - No ``OPENAI_API_KEY``: :func:`local_llm` (offline Gemma 3 270M).
    - ``OPENAI_API_KEY`` set: ``OpenAILike`` against ``OPENAI_BASE_URL`` (any OpenAI-compatible
      server, e.g. ``http://127.0.0.1:8000/v1`` for vLLM or llama-cpp-python's server; the official
      API when unset), model ``CONFORMAL_RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``; must match the
      name the server serves). It is a chat model (``/v1/chat/completions``, chat prompt).
    - ``CONFORMAL_RAG_OPENAI_COMPLETION=1`` (also ``true``/``yes``/``on``): a completion model instead
      (``is_chat_model=False``, ``/v1/completions``, the few-shot prompt, stop at a newline). Use it
      for base models, which have no chat template.
    """
    cfg = openai_settings()
    if cfg is None:
        return local_llm(temperature)
    from llama_index.llms.openai_like import OpenAILike

    completion = completion_mode()
    return OpenAILike(
        model=cfg["model"],
        api_key=cfg["api_key"],
        api_base=cfg.get("base_url"),
        temperature=temperature,
        is_chat_model=not completion,
        max_tokens=32,
        additional_kwargs={"stop": ["\n"]} if completion else {},
        timeout=60.0,
        max_retries=1,  # the samplers retry with backoff themselves
    )
