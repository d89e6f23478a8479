"""The offline stack's models for LlamaIndex: the MiniLM embedding, the default LLMs and the splitter.

Public through :mod:`conformal_rag_plugins.local`; ``MiniLMEmbedding`` also through
:mod:`conformal_rag_plugins.llamaindex`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from ..runtime.openai_settings import completion_mode, openai_settings
from .encoder import MODEL_NAME, MiniLMEncoder, get_encoder
from .llm import gemma_model_path
from .tokens import TruncationGuard, chunk_window, token_ids

if TYPE_CHECKING:
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import BaseNode


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (offline, normalised, cached) as a LlamaIndex embedding.

    The model reads 256 word pieces and drops the rest; the first time texts past that window are
    embedded, one :class:`~conformal_rag_plugins.local.TruncationWarning` gives their count (once per
    instance; split them first with :func:`~conformal_rag_plugins.local.sentence_splitter`).

    Parameters
    ----------
    encoder
        The encoder to use; default the process-wide one, caching vectors on disk.
    **kwargs
        ``BaseEmbedding`` fields (``embed_batch_size`` defaults to 64).

    Examples
    --------
    >>> from llama_index.core import Document, VectorStoreIndex
    >>> from conformal_rag_plugins.local import MiniLMEmbedding, sentence_splitter
    >>> docs = [Document(id_="normans", text="The Normans gave their name to Normandy.")]
    >>> index = VectorStoreIndex.from_documents(  # doctest: +SKIP
    ...     docs, transformations=[sentence_splitter()], embed_model=MiniLMEmbedding()
    ... )
    """

    _encoder: MiniLMEncoder = PrivateAttr()
    _truncation: TruncationGuard = PrivateAttr()

    def __init__(self, encoder: MiniLMEncoder | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", MODEL_NAME)
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(**kwargs)
        self._encoder = encoder or get_encoder()
        self._truncation = TruncationGuard()

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    def get_text_embedding(self, text: str) -> list[float]:
        """Embed one text (warns once per instance when it exceeds the window)."""
        self._truncation([text])
        return super().get_text_embedding(text)

    async def aget_text_embedding(self, text: str) -> list[float]:
        """Embed one text asynchronously (warns as :meth:`get_text_embedding`)."""
        self._truncation([text])
        return await super().aget_text_embedding(text)

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[list[float]]:
        """Embed texts in batches; the first call with texts past the window warns with their count (once)."""
        self._truncation(texts)
        return super().get_text_embedding_batch(texts, show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[list[float]]:
        """Embed texts in batches asynchronously (warns as :meth:`get_text_embedding_batch`)."""
        self._truncation(texts)
        return await super().aget_text_embedding_batch(texts, show_progress, **kwargs)

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


def llamaindex_llm(
    temperature: float = 1.0,
    max_new_tokens: int = 24,
    n_threads: int = 2,
    n_ctx: int = 2048,
    *,
    logprobs: bool = False,
) -> Any:
    """The bundled Gemma 3 270M base model as a LlamaIndex ``LlamaCPP`` LLM, offline, stopping at a newline.

    Parameters
    ----------
    temperature
        Sampling temperature (1.0 for answer sets, which sample several answers).
    max_new_tokens
        Longest answer, in tokens.
    n_threads
        CPU threads.
    n_ctx
        Prompt plus answer tokens (raise it for many chunks; trained up to 32k, the KV cache grows with it).
    logprobs
        Return a ``LlamaCPP`` that reports token log-probabilities, needed by the ``"likelihood"``
        generator score.

    Examples
    --------
    >>> from conformal_rag_plugins.local import llamaindex_llm
    >>> llm = llamaindex_llm(temperature=0.0)  # doctest: +SKIP
    >>> llm.complete("Rollo was the leader of the").text  # doctest: +SKIP
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

    - No ``OPENAI_API_KEY``: :func:`llamaindex_llm`.
    - ``OPENAI_API_KEY``: ``OpenAILike`` at ``OPENAI_BASE_URL`` (any OpenAI-compatible server; the
      official API when unset), model ``CONFORMAL_RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``), chat model.
    - ``CONFORMAL_RAG_OPENAI_COMPLETION=1`` (or ``true``/``yes``/``on``): a completion model
      (``/v1/completions``, few-shot prompt, stop at a newline), for base models without a chat template.
    """
    cfg = openai_settings()
    if cfg is None:
        return llamaindex_llm(temperature)
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


#: LlamaIndex's default document id: a random UUID4, new on every load.
_RANDOM_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def document_key(doc: BaseNode) -> str:
    """A document's stable key: its id, or its content hash when the id is LlamaIndex's random default.

    Examples
    --------
    >>> from llama_index.core import Document
    >>> document_key(Document(id_="normans", text="Rollo."))
    'normans'
    >>> document_key(Document(text="Rollo.")) == document_key(Document(text="Rollo."))
    True
    """
    return doc.node_id if not _RANDOM_ID.match(doc.node_id) else f"doc-{doc.hash[:16]}"


def stable_node_id(i: int, doc: BaseNode) -> str:
    """The splitters' ``id_func``: chunk ``i`` of ``doc`` is ``f"{document_key(doc)}::chunk{i}"`` on every rebuild.

    Examples
    --------
    >>> from llama_index.core import Document
    >>> stable_node_id(2, Document(id_="normans", text="Rollo."))
    'normans::chunk2'
    """
    return f"{document_key(doc)}::chunk{i}"


def sentence_splitter(chunk_size: int | None = None, chunk_overlap: int | None = None) -> SentenceSplitter:
    """LlamaIndex ``SentenceSplitter`` measuring MiniLM word pieces, sized to the embedding window, with stable ids.

    Parameters
    ----------
    chunk_size
        Largest chunk, in MiniLM word pieces; default 254, MiniLM's window without ``[CLS]``/``[SEP]``,
        so no chunk is truncated.
    chunk_overlap
        Word pieces shared by consecutive chunks; default 25 (at most half the chunk).

    Returns
    -------
    SentenceSplitter
        Chunk ``i`` of a document gets the node id ``f"{doc_id}::chunk{i}"`` (a document with
        LlamaIndex's random default id is keyed by its content hash instead), so rebuilding an index
        from the same documents gives the same node ids; ``node.ref_doc_id`` is the document's id.

    Examples
    --------
    >>> from llama_index.core import Document
    >>> doc = Document(id_="normans", text="The Normans gave their name to Normandy. " * 40)
    >>> nodes = sentence_splitter(chunk_size=100).get_nodes_from_documents([doc])
    >>> [n.node_id for n in nodes[:2]], nodes[0].ref_doc_id
    (['normans::chunk0', 'normans::chunk1'], 'normans')
    """
    from llama_index.core.node_parser import SentenceSplitter

    size, overlap = chunk_window(chunk_size, chunk_overlap)
    return SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=token_ids, id_func=stable_node_id)


#: The name :func:`llamaindex_llm` had before it was public (kept working).
local_llm = llamaindex_llm
