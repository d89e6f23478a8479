"""LlamaIndex adapter: ConformalRetriever, calibrate_retriever and helpers."""

from __future__ import annotations

from .calibrate import calibrate_retriever
from .calibrate_answers import calibrate_answer_sets
from .embedding import MiniLMEmbedding
from .fingerprint import fingerprint_of
from .retriever import ConformalRetriever
from .synthesizer import ConformalAnswerSetSynthesizer

__all__ = [
    "ConformalAnswerSetSynthesizer",
    "ConformalRetriever",
    "MiniLMEmbedding",
    "calibrate_answer_sets",
    "calibrate_retriever",
    "fingerprint_of",
]
