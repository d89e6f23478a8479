"""Small fixtures for answer-set control-flow tests (fake LLMs, a toy calibration)."""

from __future__ import annotations

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint


@pytest.fixture
def toy_calibration() -> AnswerSetCalibration:
    """Bonferroni at alpha=0.4 with finite thresholds on both stages (M = 4)."""
    fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    ret_scores = tuple(float(x) for x in np.linspace(0.0, 0.5, 50))
    q = conformal_quantile(ret_scores, 0.1)
    retrieval = RetrievalCalibration(q, 0.1, "split", "relative", 10, 50, 0, ret_scores, fp)
    gen_scores = [-1.0] * 20 + [-0.75] * 15 + [-0.5] * 10 + [float("inf")] * 5
    return AnswerSetCalibration.from_stages(
        retrieval, gen_scores, alpha=0.4, n_samples=4, model="fake", clustering={"method": "rougeL", "tau": 0.7}
    )
