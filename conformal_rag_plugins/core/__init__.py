"""Framework-free conformal statistics (numpy only).

The threshold of every set is computed in :mod:`conformal_rag_plugins.core.quantile`.
"""

from __future__ import annotations

from .baselines import conflare_keep, conflare_threshold
from .binomial import binom_cdf
from .errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    FingerprintMismatchError,
    GuaranteeCutWarning,
    InfiniteThresholdWarning,
    NotFittedError,
)
from .pvalues import conformal_pvalue, conformal_pvalues
from .quantile import (
    conformal_quantile,
    conformal_rank,
    coverage_bounds,
    min_calibration_size,
    pac_quantile,
    pac_rank,
)
from .retrieval_eval import PoolObservation, TrialSummary, choose_family, evaluate_splits
from .retrieval_scores import SCORE_FAMILIES, keep_mask, nonconformity, set_size
from .selection import SetDecision, check_k_bounds, decide_set
from .validation import check_alpha, check_scores

__all__ = [
    "SCORE_FAMILIES",
    "CalibrationError",
    "CalibrationIntegrityError",
    "ConformalError",
    "FingerprintMismatchError",
    "GuaranteeCutWarning",
    "InfiniteThresholdWarning",
    "NotFittedError",
    "PoolObservation",
    "SetDecision",
    "TrialSummary",
    "binom_cdf",
    "check_alpha",
    "check_k_bounds",
    "check_scores",
    "choose_family",
    "conflare_keep",
    "conflare_threshold",
    "conformal_pvalue",
    "conformal_pvalues",
    "conformal_quantile",
    "conformal_rank",
    "coverage_bounds",
    "decide_set",
    "evaluate_splits",
    "keep_mask",
    "min_calibration_size",
    "nonconformity",
    "pac_quantile",
    "pac_rank",
    "set_size",
]
