"""OpenAI or OpenAI-compatible server settings, read from the environment in one place."""

from __future__ import annotations

import os

COMPLETION_ENV = "CONFORMAL_RAG_OPENAI_COMPLETION"


def openai_settings() -> dict[str, str] | None:
    """``{"api_key", "base_url", "model"}`` when the user configured OpenAI or a compatible server, else ``None``.

    Reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` (one is needed) and ``CONFORMAL_RAG_OPENAI_MODEL`` (``gpt-4o-mini``).
    """
    key = os.environ.get("OPENAI_API_KEY")
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not key and not base_url:
        return None
    # A self-hosted server without auth (vLLM, llama.cpp) still needs some key for the client.
    out = {"api_key": key or "sk-no-key", "model": os.environ.get("CONFORMAL_RAG_OPENAI_MODEL", "gpt-4o-mini")}
    if base_url:
        out["base_url"] = base_url
    return out


def completion_mode() -> bool:
    """Whether ``$CONFORMAL_RAG_OPENAI_COMPLETION`` asks for ``/v1/completions`` (base models) over chat."""
    return os.environ.get(COMPLETION_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
