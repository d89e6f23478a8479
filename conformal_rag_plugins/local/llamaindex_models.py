"""The offline stack's models for LlamaIndex: the MiniLM embedding and the default LLMs.

``MiniLMEmbedding`` is also importable from :mod:`conformal_rag_plugins.llamaindex`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from ..runtime.openai_settings import completion_mode, openai_settings
from .encoder import MODEL_NAME, MiniLMEncoder, get_encoder
from .llm import gemma_model_path
from .tokens import chunk_window, token_ids

if TYPE_CHECKING:
    from llama_index.core.node_parser import SentenceSplitter


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (offline, normalised, cached) as a LlamaIndex embedding."""

    _encoder: MiniLMEncoder = PrivateAttr()

    def __init__(self, encoder: MiniLMEncoder | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", MODEL_NAME)
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(**kwargs)
        self._encoder = encoder or get_encoder()

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._encoder.encode([query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def get_query_embeddings(self, queries: list[str]) -> list[list[float]]:
        """The query embeddings of ``queries`` from one batched (and cached) encoder call.

        A vector equals :meth:`get_query_embedding`'s once cached; a first computation in a batch may
        differ in the last float32 bits (the arithmetic depends on the batch shape).
        """
        return self._encoder.encode(queries).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._encoder.encode([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._encoder.encode(texts).tolist()


def local_llm(
    temperature: float = 1.0,
    max_new_tokens: int = 24,
    n_threads: int = 2,
    n_ctx: int = 2048,
    *,
    logprobs: bool = False,
) -> Any:
    """``LlamaCPP`` over the bundled Gemma 3 270M base model, stopping at a newline.

    ``n_ctx``: prompt plus answer tokens (raise it for many chunks; trained up to 32k, the KV cache
    grows with it). ``logprobs=True`` returns a :class:`~.llamaindex_logprobs.LlamaCPPWithLogprobs`,
    needed by the ``"likelihood"`` generator score.
    """
    from llama_index.llms.llama_cpp import LlamaCPP

    from .llamaindex_logprobs import LlamaCPPWithLogprobs

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

    - No ``OPENAI_API_KEY``: :func:`local_llm`.
    - ``OPENAI_API_KEY``: ``OpenAILike`` at ``OPENAI_BASE_URL`` (any OpenAI-compatible server; the
      official API when unset), model ``CONFORMAL_RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``), chat model.
    - ``CONFORMAL_RAG_OPENAI_COMPLETION=1`` (or ``true``/``yes``/``on``): a completion model
      (``/v1/completions``, few-shot prompt, stop at a newline), for base models without a chat template.
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


def sentence_splitter(chunk_size: int | None = None, chunk_overlap: int | None = None) -> SentenceSplitter:
    """LlamaIndex ``SentenceSplitter`` measuring MiniLM word pieces (window: ``chunk_window``)."""
    from llama_index.core.node_parser import SentenceSplitter

    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=token_ids)
