"""The offline stack's models for LangChain: the MiniLM embeddings and the default LLMs.

``MiniLMEmbeddings`` is also importable from :mod:`conformal_rag_plugins.langchain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from ..runtime.openai_settings import completion_mode, openai_settings
from .encoder import MODEL_NAME, MiniLMEncoder, get_encoder
from .llm import gemma_model_path
from .tokens import chunk_window, embedding_tokenizer

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (offline, normalised, cached) for LangChain vector stores."""

    model_name = MODEL_NAME

    def __init__(self, encoder: MiniLMEncoder | None = None) -> None:
        self.encoder = encoder or get_encoder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return self.encoder.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.encoder.encode([text])[0].tolist()

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed many queries in one batched (and cached) encoder call.

        A vector equals :meth:`embed_query`'s once cached; a first computation in a batch may differ in
        the last float32 bits (the arithmetic depends on the batch shape).
        """
        return self.encoder.encode(texts).tolist()


def local_llm(temperature: float = 1.0, max_tokens: int = 24, n_threads: int = 2, *, logprobs: bool = False) -> Any:
    """``LlamaCpp`` over the bundled Gemma 3 270M base model.

    ``logprobs=True`` returns a :class:`~.langchain_logprobs.LlamaCppWithLogprobs` (for the
    ``"likelihood"`` generator score; a few milliseconds per token).
    """
    from langchain_community.llms import LlamaCpp

    from .langchain_logprobs import LlamaCppWithLogprobs

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

    - No ``OPENAI_API_KEY``: :func:`local_llm`.
    - ``OPENAI_API_KEY``: ``ChatOpenAI`` at ``OPENAI_BASE_URL`` (any OpenAI-compatible server; the
      official API when unset), model ``CONFORMAL_RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``), chat prompt.
    - ``CONFORMAL_RAG_OPENAI_COMPLETION=1`` (or ``true``/``yes``/``on``): ``langchain_openai.OpenAI``
      (``/v1/completions``, few-shot prompt, stop at a newline), for base models without a chat template.
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


def recursive_splitter(
    chunk_size: int | None = None, chunk_overlap: int | None = None
) -> RecursiveCharacterTextSplitter:
    """LangChain ``RecursiveCharacterTextSplitter`` measuring MiniLM word pieces (window: ``chunk_window``)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        embedding_tokenizer(), chunk_size=size, chunk_overlap=overlap
    )
