"""LangChain adapter: ConformalRetriever, calibrate_retriever and helpers."""

from __future__ import annotations

from ..local.langchain_models import MiniLMEmbeddings
from .adaptive_chain import AdaptiveContextSynthesizer
from .calibrate import calibrate_retriever
from .calibrate_answers import LangChainAnswerHost, calibrate_answer_sets
from .calibrate_compressor import calibrate_compressor
from .compressor import ConformalDocumentCompressor
from .fingerprint import fingerprint_of
from .fusion import ScoredFusionRetriever
from .hybrid_tuning import calibrate_hybrid_retriever
from .judge_labels import label_with_judge
from .question_gen import generate_calibration_questions
from .retrieval_host import LangChainHost
from .retriever import ConformalRetriever
from .synthesizer import ConformalAnswerSetSynthesizer

__all__ = [
    "AdaptiveContextSynthesizer",
    "ConformalAnswerSetSynthesizer",
    "ConformalDocumentCompressor",
    "ConformalRetriever",
    "LangChainAnswerHost",
    "LangChainHost",
    "MiniLMEmbeddings",
    "ScoredFusionRetriever",
    "calibrate_answer_sets",
    "calibrate_compressor",
    "calibrate_hybrid_retriever",
    "calibrate_retriever",
    "fingerprint_of",
    "generate_calibration_questions",
    "label_with_judge",
]
