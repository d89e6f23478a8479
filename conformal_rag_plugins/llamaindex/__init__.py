"""LlamaIndex adapter: ConformalRetriever, calibrate_retriever and helpers."""

from __future__ import annotations

from ..local.llamaindex_models import MiniLMEmbedding
from .adaptive_synthesizer import AdaptiveContextSynthesizer
from .calibrate import calibrate_retriever
from .calibrate_answers import LlamaIndexAnswerHost, calibrate_answer_sets
from .fingerprint import fingerprint_of
from .hybrid_tuning import calibrate_hybrid_retriever
from .judge_labels import label_with_judge
from .postprocessor import ConformalNodePostprocessor
from .question_gen import generate_calibration_questions
from .retrieval_host import LlamaIndexHost
from .retriever import ConformalRetriever
from .synthesizer import ConformalAnswerSetSynthesizer

__all__ = [
    "AdaptiveContextSynthesizer",
    "ConformalAnswerSetSynthesizer",
    "ConformalNodePostprocessor",
    "ConformalRetriever",
    "LlamaIndexAnswerHost",
    "LlamaIndexHost",
    "MiniLMEmbedding",
    "calibrate_answer_sets",
    "calibrate_hybrid_retriever",
    "calibrate_retriever",
    "fingerprint_of",
    "generate_calibration_questions",
    "label_with_judge",
]
