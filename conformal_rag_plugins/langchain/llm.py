"""Default LangChain model: OpenAI(-compatible) when configured, else local Gemma 3 270M."""

from __future__ import annotations

from typing import Any

from ..local.llm import gemma_model_path, openai_settings

__all__ = ["default_llm", "local_llm"]


def local_llm(temperature: float = 1.0, max_tokens: int = 24, n_threads: int = 2) -> Any:
    """``langchain_community`` ``LlamaCpp`` over the bundled Gemma 3 270M base model.

    Examples
    --------
    >>> llm = local_llm()  # doctest: +SKIP
    """
    from langchain_community.llms import LlamaCpp

    return LlamaCpp(
        model_path=str(gemma_model_path()),
        temperature=temperature,
        max_tokens=max_tokens,
        n_ctx=2048,
        n_threads=n_threads,
        stop=["\n"],
        verbose=False,
    )


def default_llm(temperature: float = 1.0) -> Any:
    """``ChatOpenAI`` when ``OPENAI_API_KEY`` is set (``OPENAI_BASE_URL`` for any compatible server),
    otherwise :func:`local_llm`."""
    cfg = openai_settings()
    if cfg is None:
        return local_llm(temperature)
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=cfg["model"],
        api_key=cfg["api_key"],
        base_url=cfg.get("base_url"),
        temperature=temperature,
        max_tokens=32,
        timeout=60.0,
        max_retries=3,
    )
