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

__all__ = [
    "SCHEMA_VERSION",
    "CalibrationExample",
    "CorpusEntry",
    "Fingerprint",
    "RetrievalCalibration",
    "RetrievalConformalizer",
    "gold_positions",
    "load_corpus",
    "load_examples",
    "load_qa",
    "save_examples",
    "split_examples",
]
