"""Framework-free conformal statistics (numpy; rouge-score and scikit-optimize imported lazily).

The threshold of every set is computed in :mod:`conformal_rag_plugins.core.quantile`.
"""

from __future__ import annotations

from .adaptive_schedule import geometric_schedule, is_no_answer
from .answer_metrics import (
    AnswerSetMetrics,
    AnswerSetReport,
    SetSizes,
    evaluate_answer_set,
    evaluate_answer_sets,
    set_abstains,
    set_covers,
    set_sizes,
)
from .baselines import conflare_keep, conflare_threshold
from .binomial import binom_cdf
from .bo import BOResult, minimize_1d, optimize_alpha_split, optimize_hmp_weight
from .clustering import AnswerCluster, Clustering, cluster_answers, merge_clusters, rouge_f1
from .combination import (
    BonferroniThresholds,
    EndToEndDecision,
    HarmonicMeanRule,
    PACThresholds,
    bonferroni_thresholds,
    decide_end_to_end,
    harmonic_mean_rule,
    pac_thresholds,
    weighted_harmonic_mean,
)
from .config_search import TuningChoice, choose_configuration, evaluate_tuned_splits
from .errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    FingerprintMismatchError,
    GeneratorMismatchError,
    GuaranteeCutWarning,
    InfiniteThresholdWarning,
    NotFittedError,
)
from .generation_scores import answer_matches, coverage_ceiling, generation_score, generator_set
from .normalize import is_abstention, normalize_answer
from .pools import PoolObservation, TrialSummary, choose_family
from .pvalues import conformal_pvalue, conformal_pvalues
from .quantile import (
    conformal_quantile,
    conformal_rank,
    coverage_bounds,
    min_calibration_size,
    pac_quantile,
    pac_rank,
)
from .retrieval_scores import SCORE_FAMILIES, candidate_nonconformity, keep_mask, nonconformity, set_size
from .selection import SetDecision, check_k_bounds, decide_set
from .splits import RandomSplits
from .validation import check_alpha, check_scores

__all__ = [
    "SCORE_FAMILIES",
    "AnswerCluster",
    "AnswerSetMetrics",
    "AnswerSetReport",
    "BOResult",
    "BonferroniThresholds",
    "CalibrationError",
    "CalibrationIntegrityError",
    "Clustering",
    "ConformalError",
    "EndToEndDecision",
    "FingerprintMismatchError",
    "GeneratorMismatchError",
    "GuaranteeCutWarning",
    "HarmonicMeanRule",
    "InfiniteThresholdWarning",
    "NotFittedError",
    "PACThresholds",
    "PoolObservation",
    "RandomSplits",
    "SetDecision",
    "SetSizes",
    "TrialSummary",
    "TuningChoice",
    "answer_matches",
    "binom_cdf",
    "bonferroni_thresholds",
    "candidate_nonconformity",
    "check_alpha",
    "check_k_bounds",
    "check_scores",
    "choose_configuration",
    "choose_family",
    "cluster_answers",
    "conflare_keep",
    "conflare_threshold",
    "conformal_pvalue",
    "conformal_pvalues",
    "conformal_quantile",
    "conformal_rank",
    "coverage_bounds",
    "coverage_ceiling",
    "decide_end_to_end",
    "decide_set",
    "evaluate_answer_set",
    "evaluate_answer_sets",
    "evaluate_tuned_splits",
    "generation_score",
    "generator_set",
    "geometric_schedule",
    "harmonic_mean_rule",
    "is_abstention",
    "is_no_answer",
    "keep_mask",
    "merge_clusters",
    "min_calibration_size",
    "minimize_1d",
    "nonconformity",
    "normalize_answer",
    "optimize_alpha_split",
    "optimize_hmp_weight",
    "pac_quantile",
    "pac_rank",
    "pac_thresholds",
    "rouge_f1",
    "set_abstains",
    "set_covers",
    "set_size",
    "set_sizes",
    "weighted_harmonic_mean",
]
