"""LangChain adapter: ConformalRetriever, calibrate_retriever and helpers."""

from __future__ import annotations

from .calibrate import calibrate_retriever
from .embedding import MiniLMEmbeddings
from .fingerprint import fingerprint_of
from .fusion import ScoredFusionRetriever
from .retriever import ConformalRetriever

__all__ = [
    "ConformalRetriever",
    "MiniLMEmbeddings",
    "ScoredFusionRetriever",
    "calibrate_retriever",
    "fingerprint_of",
]
