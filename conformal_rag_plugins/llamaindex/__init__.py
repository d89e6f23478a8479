"""LlamaIndex adapter: ConformalRetriever, calibrate_retriever and helpers."""

from __future__ import annotations

from .calibrate import calibrate_retriever
from .embedding import MiniLMEmbedding
from .fingerprint import fingerprint_of
from .retriever import ConformalRetriever

__all__ = ["ConformalRetriever", "MiniLMEmbedding", "calibrate_retriever", "fingerprint_of"]
