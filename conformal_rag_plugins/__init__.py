"""Conformal prediction for RAG: calibrated retrieval sets for LlamaIndex and LangChain.

Framework adapters live in :mod:`conformal_rag_plugins.llamaindex` and
:mod:`conformal_rag_plugins.langchain`; the statistics in :mod:`conformal_rag_plugins.core`
(the threshold itself in ``core/quantile.py``).
"""

from __future__ import annotations

from .core import conformal_quantile, pac_quantile
from .datasets.examples import (
    CalibrationExample,
    load_corpus,
    load_examples,
    load_qa,
    save_examples,
    split_examples,
)
from .monitor.monitor import ConformalMonitor
from .retrieval.calibrate_host import calibrate_host
from .retrieval.calibration import RetrievalCalibration
from .retrieval.conformalizer import RetrievalConformalizer
from .retrieval.fingerprint import Fingerprint
from .retrieval.host import Parents, RetrievalHost
from .retrieval.options import RetrievalOptions
from .retrieval.serving import ServingOptions
from .tuning.options import TuningOptions

__version__ = "0.1.0"

__all__ = [
    "CalibrationExample",
    "ConformalMonitor",
    "Fingerprint",
    "Parents",
    "RetrievalCalibration",
    "RetrievalConformalizer",
    "RetrievalHost",
    "RetrievalOptions",
    "ServingOptions",
    "TuningOptions",
    "__version__",
    "calibrate_host",
    "conformal_quantile",
    "load_corpus",
    "load_examples",
    "load_qa",
    "pac_quantile",
    "save_examples",
    "split_examples",
]
