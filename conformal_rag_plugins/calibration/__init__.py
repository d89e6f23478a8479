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
from .matching import gold_positions
from .retrieval import SCHEMA_VERSION, RetrievalCalibration
from .tuning import DEFAULT_FUSION_GRID, FusionConfig, TunedCalibration, calibrate_tuned

__all__ = [
    "DEFAULT_FUSION_GRID",
    "SCHEMA_VERSION",
    "CalibrationExample",
    "CorpusEntry",
    "Fingerprint",
    "FusionConfig",
    "RetrievalCalibration",
    "RetrievalConformalizer",
    "TunedCalibration",
    "calibrate_tuned",
    "gold_positions",
    "load_corpus",
    "load_examples",
    "load_qa",
    "save_examples",
    "split_examples",
]
