"""The sizes the docs quote for the flag rule are the library's, and the docs say what the code does (issue 41, 5).

``docs/production/groups.md`` said a group needs 9 questions at alpha = 0.1 (the plain rank's
minimum; the flag rule needs ``flagged_min_calibration_size(0.1)``), and ``docs/guarantees.md``
promised a ``CalibrationError`` for a set too small for a finite threshold where n = 9-17 gets +inf
with an ``InfiniteThresholdWarning``. The numbers are computed here, and the behaviour is checked.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationError, InfiniteThresholdWarning
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import flagged_min_calibration_size, min_calibration_size
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions

DOCS = Path(__file__).resolve().parents[2] / "docs"
PLAIN, FLAGGED = min_calibration_size(0.1), flagged_min_calibration_size(0.1)


def _prose(page: str) -> str:
    """The page with its lines joined (a sentence may wrap)."""
    return re.sub(r"\s*\n\s*", " ", (DOCS / page).read_text(encoding="utf-8"))


def _calibrate(n: int, *, strict: bool = False):
    obs = [PoolObservation(np.array([0.9, 0.8, 0.5]), (0,), question_id=f"q{i}") for i in range(n)]
    fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    options = RetrievalOptions(confidence_level=0.9, strict=strict)
    return calibrate_from_pools(obs, fingerprint=fp, pool_size=3, options=options)


def test_groups_page_quotes_the_flag_rules_minimum() -> None:
    """Fails before the fix: "fewer than 9 at α = 0.1"."""
    prose = _prose("production/groups.md")
    quoted = re.findall(r"fewer than (\d+) at α = 0\.1", prose)
    assert quoted == [str(FLAGGED)], quoted


def test_guarantees_page_says_what_a_small_calibration_gets() -> None:
    """Fails before the fix: the page promised a CalibrationError, with no word of n = 9-17."""
    prose = _prose("guarantees.md")
    assert f"n < {PLAIN} at α = 0.1" in prose  # refused
    assert f"n = {PLAIN}–{FLAGGED - 1} at α = 0.1" in prose  # +inf with a warning
    # and that is what the code does
    with pytest.raises(CalibrationError, match=f"at least {PLAIN}"):
        _calibrate(PLAIN - 1)
    for n in (PLAIN, FLAGGED - 1):
        with pytest.warns(InfiniteThresholdWarning):
            assert _calibrate(n).is_infinite_
        with pytest.raises(CalibrationError):
            _calibrate(n, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InfiniteThresholdWarning)
        assert not _calibrate(FLAGGED).is_infinite_
