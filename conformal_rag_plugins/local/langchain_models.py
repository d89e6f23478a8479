"""The offline stack's models for LangChain: the MiniLM embeddings, the default LLMs and the splitter.

Public through :mod:`conformal_rag_plugins.local`; ``MiniLMEmbeddings`` also through
:mod:`conformal_rag_plugins.langchain`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ..runtime.openai_settings import completion_mode, openai_settings
from .encoder import MODEL_NAME, MiniLMEncoder, get_encoder
from .llm import gemma_model_path
from .tokens import TruncationGuard, chunk_window, embedding_tokenizer

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (offline, normalised, cached) for LangChain vector stores.

    The model reads 256 word pieces and drops the rest; the first time passages past that window are
    embedded, one :class:`~conformal_rag_plugins.local.TruncationWarning` gives their count (once per
    instance; split them first with :func:`~conformal_rag_plugins.local.recursive_splitter`).

    Parameters
    ----------
    encoder
        The encoder to use; default the process-wide one, caching vectors on disk.

    Examples
    --------
    >>> from langchain_core.documents import Document
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from conformal_rag_plugins.local import MiniLMEmbeddings, recursive_splitter
    >>> docs = [Document("The Normans gave their name to Normandy.", id="normans")]
    >>> store = InMemoryVectorStore(MiniLMEmbeddings())  # doctest: +SKIP
    >>> store.add_documents(recursive_splitter().split_documents(docs))  # doctest: +SKIP
    ['normans::chunk0']
    """

    model_name = MODEL_NAME

    def __init__(self, encoder: MiniLMEncoder | None = None) -> None:
        self.encoder = encoder or get_encoder()
        self._truncation = TruncationGuard()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (the first call with passages past the window warns with their count, once)."""
        self._truncation(texts)
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


def langchain_llm(
    temperature: float = 1.0, max_tokens: int = 24, n_threads: int = 2, n_ctx: int = 2048, *, logprobs: bool = False
) -> Any:
    """The bundled Gemma 3 270M base model as a LangChain ``LlamaCpp`` LLM, offline, stopping at a newline.

    Parameters
    ----------
    temperature
        Sampling temperature (1.0 for answer sets, which sample several answers).
    max_tokens
        Longest answer, in tokens.
    n_threads
        CPU threads.
    n_ctx
        Context window in tokens (Gemma 3 reads up to 32,768); a chain that stuffs a large set into one
        prompt needs more than the default.
    logprobs
        Return a ``LlamaCpp`` that reports token log-probabilities (for the ``"likelihood"`` generator
        score; a few milliseconds per token).

    Examples
    --------
    >>> from conformal_rag_plugins.local import langchain_llm
    >>> llm = langchain_llm(temperature=0.0)  # doctest: +SKIP
    >>> llm.invoke("Rollo was the leader of the")  # doctest: +SKIP
    """
    from langchain_community.llms import LlamaCpp

    from .langchain_logprobs import LlamaCppWithLogprobs

    cls = LlamaCppWithLogprobs if logprobs else LlamaCpp
    return cls(
        model_path=str(gemma_model_path()),
        temperature=temperature,
        max_tokens=max_tokens,
        n_ctx=n_ctx,
        n_batch=512,  # LlamaCpp's default of 8 tokens per batch makes prompt evaluation several times slower
        n_threads=n_threads,
        stop=["\n"],
        verbose=False,
    )


def default_llm(temperature: float = 1.0) -> Any:
    """The model to sample answers from, chosen by environment variables.

    - No ``OPENAI_API_KEY``: :func:`langchain_llm`.
    - ``OPENAI_API_KEY``: ``ChatOpenAI`` at ``OPENAI_BASE_URL`` (any OpenAI-compatible server; the
      official API when unset), model ``CONFORMAL_RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``), chat prompt.
    - ``CONFORMAL_RAG_OPENAI_COMPLETION=1`` (or ``true``/``yes``/``on``): ``langchain_openai.OpenAI``
      (``/v1/completions``, few-shot prompt, stop at a newline), for base models without a chat template.
    """
    cfg = openai_settings()
    if cfg is None:
        return langchain_llm(temperature)
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


def document_key(doc: Document) -> str:
    """A LangChain document's stable key: ``doc.id``, else ``metadata["doc_id"]``, else a hash of its content.

    Examples
    --------
    >>> document_key(Document("Rollo.", id="normans")), document_key(Document("Rollo.", metadata={"doc_id": "n"}))
    ('normans', 'n')
    >>> document_key(Document("Rollo.")) == document_key(Document("Rollo."))
    True
    """
    if doc.id:
        return str(doc.id)
    if doc.metadata.get("doc_id"):
        return str(doc.metadata["doc_id"])
    content = json.dumps([doc.page_content, doc.metadata], sort_keys=True, default=str)
    return "doc-" + hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def split_keeping_documents(splitter: Any, documents: Iterable[Document]) -> list[Document]:
    """Chunks of each document: chunk ``i`` gets ``id=f"{doc_id}::chunk{i}"`` and ``metadata["doc_id"]``."""
    out: list[Document] = []
    for doc in documents:
        key = document_key(doc)
        for i, chunk in enumerate(splitter.create_documents([doc.page_content], [doc.metadata])):
            chunk.metadata["doc_id"] = key
            chunk.id = f"{key}::chunk{i}"
            out.append(chunk)
    return out


@lru_cache(maxsize=1)
def _splitter_class() -> type[RecursiveCharacterTextSplitter]:
    """The splitter class, defined on first use (``langchain_text_splitters`` is imported only then)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    class MiniLMTextSplitter(RecursiveCharacterTextSplitter):
        """``RecursiveCharacterTextSplitter`` whose chunks keep their document (``metadata["doc_id"]``, stable ids)."""

        def split_documents(self, documents: Iterable[Document]) -> list[Document]:
            """Split each document; chunk ``i`` gets ``id=f"{doc_id}::chunk{i}"`` and ``metadata["doc_id"]``."""
            return split_keeping_documents(self, documents)

    return MiniLMTextSplitter


def recursive_splitter(
    chunk_size: int | None = None, chunk_overlap: int | None = None
) -> RecursiveCharacterTextSplitter:
    """LangChain ``RecursiveCharacterTextSplitter`` measuring MiniLM word pieces, sized to the window, with stable ids.

    Parameters
    ----------
    chunk_size
        Largest chunk, in MiniLM word pieces; default 254, MiniLM's window without ``[CLS]``/``[SEP]``,
        so no chunk is truncated.
    chunk_overlap
        Word pieces shared by consecutive chunks; default 25 (at most half the chunk).

    Returns
    -------
    RecursiveCharacterTextSplitter
        A splitter whose ``split_documents`` gives chunk ``i`` of a document
        the id ``f"{doc_id}::chunk{i}"`` and ``metadata["doc_id"] = doc_id`` (the key LangChain's
        ``ParentDocumentRetriever`` uses), where ``doc_id`` is the document's ``id`` (else its
        ``metadata["doc_id"]``, else a hash of its content): rebuilding a store from the same documents
        gives the same ids, and gold document ids find their chunks.

    Examples
    --------
    >>> from langchain_core.documents import Document
    >>> doc = Document("The Normans gave their name to Normandy. " * 40, id="normans")
    >>> chunks = recursive_splitter(chunk_size=100).split_documents([doc])
    >>> [c.id for c in chunks[:2]], chunks[0].metadata["doc_id"]
    (['normans::chunk0', 'normans::chunk1'], 'normans')
    """
    size, overlap = chunk_window(chunk_size, chunk_overlap)
    splitter = _splitter_class().from_huggingface_tokenizer(
        embedding_tokenizer(), chunk_size=size, chunk_overlap=overlap
    )
    return splitter


#: The name :func:`langchain_llm` had before it was public (kept working).
local_llm = langchain_llm
