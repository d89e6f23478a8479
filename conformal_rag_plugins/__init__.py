"""Conformal prediction for RAG: calibrated retrieval sets and answer sets for LlamaIndex and LangChain.

This module lists every framework-neutral public name; the framework classes are in
:mod:`conformal_rag_plugins.llamaindex` and :mod:`conformal_rag_plugins.langchain`. Deeper
modules are private: import from these three places.

Examples
--------
>>> from conformal_rag_plugins import conformal_quantile
>>> conformal_quantile([i / 20 for i in range(1, 21)], 0.1)  # 20 scores: rank 20, the pool may miss
1.0
"""

from __future__ import annotations

from .answer_sets.calibration import AnswerSetCalibration
from .answer_sets.conformalizer import AnswerSetConformalizer
from .answer_sets.options import (
    AdaptiveSchedule,
    ClusteringOptions,
    PilotOptions,
    RetrievalStageOptions,
    SamplingOptions,
    SplitOptions,
)
from .core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    CorpusChangedWarning,
    CoverageCeilingWarning,
    FingerprintMismatchError,
    GeneratorMismatchError,
    GuaranteeCutWarning,
    NotFittedError,
    SmallGroupWarning,
    UncheckedCorpusWarning,
    UncheckedGeneratorWarning,
    UnreachableTargetError,
)
from .core.quantile import conformal_quantile, pac_quantile
from .datasets.examples import (
    CalibrationExample,
    CorpusEntry,
    load_corpus,
    load_examples,
    save_examples,
    split_examples,
)
from .datasets.question_file import load_qa
from .datasets.text_folder import load_text_folder
from .labelling.options import JudgeOptions, QuestionOptions
from .monitor.monitor import ConformalMonitor, ServedScores
from .report.data import Verdict
from .report.held_out import HeldOutReport
from .report.notebook import answer_sets_figure, coverage_figure, scores_figure, set_sizes_figure
from .retrieval.calibration import RetrievalCalibration
from .retrieval.conformalizer import RetrievalConformalizer
from .retrieval.conformalizer import calibrate_on_host as calibrate_host
from .retrieval.fingerprint import Fingerprint
from .retrieval.host import Parents, RetrievalHost
from .retrieval.options import RetrievalOptions
from .retrieval.serving import ServingOptions
from .tuning.options import TuningOptions

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 (grouped by concept, listed once)
    # conformalizers and what they fit
    "AnswerSetCalibration",
    "AnswerSetConformalizer",
    "RetrievalCalibration",
    "RetrievalConformalizer",
    "calibrate_host",
    # option objects, passed whole
    "AdaptiveSchedule",
    "ClusteringOptions",
    "JudgeOptions",
    "Parents",
    "PilotOptions",
    "QuestionOptions",
    "RetrievalOptions",
    "RetrievalStageOptions",
    "SamplingOptions",
    "ServingOptions",
    "SplitOptions",
    "TuningOptions",
    # hosts and production
    "ConformalMonitor",
    "Fingerprint",
    "RetrievalHost",
    "ServedScores",
    # data
    "CalibrationExample",
    "CorpusEntry",
    "load_corpus",
    "load_examples",
    "load_qa",
    "load_text_folder",
    "save_examples",
    "split_examples",
    # the threshold itself
    "conformal_quantile",
    "pac_quantile",
    # the held-out verdict (ConformalRetriever.evaluate)
    "HeldOutReport",
    "Verdict",
    # report figures in a notebook
    "answer_sets_figure",
    "coverage_figure",
    "scores_figure",
    "set_sizes_figure",
    # errors and warnings
    "CalibrationError",
    "CalibrationIntegrityError",
    "ConformalError",
    "CorpusChangedWarning",
    "CoverageCeilingWarning",
    "FingerprintMismatchError",
    "GeneratorMismatchError",
    "GuaranteeCutWarning",
    "NotFittedError",
    "SmallGroupWarning",
    "UncheckedCorpusWarning",
    "UncheckedGeneratorWarning",
    "UnreachableTargetError",
    "__version__",
]
