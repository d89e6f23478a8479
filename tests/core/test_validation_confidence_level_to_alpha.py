"""One conversion of a confidence level to alpha: ``core.validation.alpha_from_confidence_level``.

Every route (retrieval, answer sets, tuning, the report's level grid, the CLI's ``--confidence-level``)
calls it; none writes ``1 - confidence_level`` itself, so 0.9 is alpha 0.1 everywhere.
"""

from __future__ import annotations

import io
import math
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

import conformal_rag_plugins
from conformal_rag_plugins.commands.levels import alpha_of, confidence_level_of
from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_rank
from conformal_rag_plugins.core.validation import alpha_from_confidence_level
from conformal_rag_plugins.report.data import _level_check
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

PACKAGE = Path(conformal_rag_plugins.__file__).parent
HOME = PACKAGE / "core" / "validation.py"
# core maths whose own ``level`` is not a calibration's confidence level: a binomial tail's window and a
# Clopper-Pearson bound (binomial.py), the central band's coverage (coverage_band.py)
NOT_A_CALIBRATION_LEVEL = {PACKAGE / "core" / "binomial.py", PACKAGE / "core" / "coverage_band.py"}
# a level turned into alpha by hand: ``1 - level``, ``1.0 - self.confidence_level``, ``1 - check_alpha(level)``,
# ``round(1.0 - level, 12)``, or the decimal spelling of it
_BY_HAND = re.compile(
    r"\b1(?:\.0*)?\s*-\s*(?:float\()?\s*(?:self\.|opts\.|options\.)?(?:confidence_level|confidence|level)\b"
    r"|\b1(?:\.0*)?\s*-\s*check_alpha\s*\("
    r"|\b1\s*-\s*Decimal\s*\("
)


def _code(path: Path) -> str:
    """The file's source with strings and comments blanked (docstrings may explain the conversion)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    text = list("".join(lines))
    blank = (tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1))
    for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
        if tok.type in blank:
            (r0, c0), (r1, c1) = tok.start, tok.end
            for i in range(starts[r0 - 1] + c0, starts[r1 - 1] + c1):
                if text[i] != "\n":
                    text[i] = " "
    return "".join(text)


@pytest.mark.parametrize(("level", "alpha"), [(0.9, 0.1), (0.95, 0.05), (0.8, 0.2), (0.7, 0.3), (0.999, 0.001)])
def test_a_level_gives_the_alpha_as_written(level: float, alpha: float) -> None:
    assert alpha_from_confidence_level(level) == alpha  # exactly: 0.9 is 0.1, not 0.09999999999999998
    assert alpha_from_confidence_level(alpha) == level  # the same arithmetic turns alpha back into its level


@pytest.mark.parametrize("bad", [0, 0.0, 1, 1.0, 1.5, -0.1, math.nan, "high", None])
def test_a_level_outside_the_open_unit_interval_is_refused(bad: object) -> None:
    with pytest.raises(ConformalError, match="confidence_level must"):
        alpha_from_confidence_level(bad)  # type: ignore[arg-type]


def test_the_error_names_the_value_it_was_given_as() -> None:
    with pytest.raises(ConformalError, match="--confidence-level must lie strictly between 0 and 1"):
        alpha_from_confidence_level(1.5, "--confidence-level")


def test_the_cli_spelling_is_the_library_conversion() -> None:
    for level in (0.9, 0.95, 0.8, 0.123456789):
        assert alpha_of(level) == alpha_from_confidence_level(level)
        assert confidence_level_of(alpha_of(level)) == level


def test_no_module_converts_a_level_by_hand() -> None:
    """Only the one function subtracts a level from one (guards against a sixth conversion)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME or path in NOT_A_CALIBRATION_LEVEL:
            continue
        found += [f"{path.relative_to(PACKAGE)}: {m.group(0)}" for m in _BY_HAND.finditer(_code(path))]
    assert found == []


def test_the_guard_would_see_each_old_spelling() -> None:
    """The pattern is not vacuous: each way the five places used to write it is caught."""
    for spelling in (
        'alpha = 1.0 - check_alpha(self.confidence_level, "confidence_level")',
        "generator_share(round(1.0 - self.confidence_level, 12), self.split)",
        "pool_miss_advice(n, m, 1.0 - confidence_level, pool_size)",
        "q = _quantile(calibration.scores_, 1.0 - level)",
        "return float(1 - Decimal(repr(float(level))))",
    ):
        assert _BY_HAND.search(spelling), spelling


def test_the_report_grid_checks_a_level_at_the_rank_the_calibration_used() -> None:
    """n = 9 at 0.9: (n+1)(1-alpha) = 9 is whole, so ``1.0 - 0.9`` (0.0999...98) moved the rank to 10 (+inf)."""
    rng = np.random.default_rng(5)
    obs = [PoolObservation(np.sort(rng.uniform(size=4))[::-1].copy(), (int(rng.integers(4)),)) for _ in range(9)]
    fp = Fingerprint("none", "list", "cosine", "toy", 4, "cosine")
    with pytest.warns(Warning):
        cal = RetrievalConformalizer(0.9, score="similarity").conformalize_pools(obs, fingerprint=fp, pool_size=4)
    checked, _ = _level_check(cal.calibration_, 0.9, n_test=50)
    assert checked.rank == conformal_rank(9, 0.1) == 9
    assert cal.calibration_.alpha_ == 0.1
