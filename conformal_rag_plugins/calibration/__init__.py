"""Calibration data, fitted calibration objects and the conformalizer."""

from __future__ import annotations

from .conformalizer import RetrievalConformalizer
from .examples import (
    CalibrationExample,
    CorpusEntry,
    load_corpus,
    load_examples,
    load_qa,
    save_examples,
    split_examples,
)
from .fingerprint import Fingerprint
from .gold_matching import gold_positions
from .llm_judge import LabelReport, LLMJudge, alabel_examples, label_examples
from .monitor import ConformalMonitor, MonitorUpdate, ServedScores
from .question_gen import GenerationReport, agenerate_questions, sample_chunks
from .retrieval import SCHEMA_VERSION, RetrievalCalibration
from .text_folder import load_text_folder
from .tuned_calibration import DEFAULT_FUSION_GRID, FusionConfig, TunedCalibration, calibrate_tuned

__all__ = [
    "DEFAULT_FUSION_GRID",
    "SCHEMA_VERSION",
    "CalibrationExample",
    "ConformalMonitor",
    "CorpusEntry",
    "Fingerprint",
    "FusionConfig",
    "GenerationReport",
    "LLMJudge",
    "LabelReport",
    "MonitorUpdate",
    "RetrievalCalibration",
    "RetrievalConformalizer",
    "ServedScores",
    "TunedCalibration",
    "agenerate_questions",
    "alabel_examples",
    "calibrate_tuned",
    "gold_positions",
    "label_examples",
    "load_corpus",
    "load_examples",
    "load_qa",
    "load_text_folder",
    "sample_chunks",
    "save_examples",
    "split_examples",
]
