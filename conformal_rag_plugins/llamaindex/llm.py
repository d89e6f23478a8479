"""Default LlamaIndex LLM: OpenAI(-compatible) when configured, else local Gemma 3 270M."""

from __future__ import annotations

from typing import Any

from ..local.llm import gemma_model_path, openai_settings

__all__ = ["default_llm", "local_llm"]


def local_llm(temperature: float = 1.0, max_new_tokens: int = 24, n_threads: int = 2) -> Any:
    """``LlamaCPP`` over the bundled Gemma 3 270M base model, stopping at a newline.

    Examples
    --------
    >>> llm = local_llm()  # doctest: +SKIP
    >>> llm.metadata.is_chat_model  # doctest: +SKIP
    False
    """
    from llama_index.llms.llama_cpp import LlamaCPP

    return LlamaCPP(
        model_path=str(gemma_model_path()),
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        context_window=2048,
        generate_kwargs={"stop": ["\n"]},
        model_kwargs={"n_threads": n_threads, "n_ctx": 2048},
        verbose=False,
    )


def default_llm(temperature: float = 1.0) -> Any:
    """``OpenAILike`` when ``OPENAI_API_KEY`` is set (``OPENAI_BASE_URL`` for any compatible server),
    otherwise :func:`local_llm`."""
    cfg = openai_settings()
    if cfg is None:
        return local_llm(temperature)
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model=cfg["model"],
        api_key=cfg["api_key"],
        api_base=cfg.get("base_url"),
        temperature=temperature,
        is_chat_model=True,
        max_tokens=32,
        timeout=60.0,
        max_retries=3,
    )
