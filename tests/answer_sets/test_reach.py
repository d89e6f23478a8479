"""Issue 41, section 4: what a generator can reach under the flag rule, said before its calibration is sampled.

The need is computed from ``core.quantile.flagged_rank`` (never a hard-coded rank), so it follows the
rule the calibration uses. Before this module the pilot compared the ceiling with ``1 - alpha_gen``,
which a generator that misses more than the bound passes and then keeps ``+inf``.
"""

from __future__ import annotations

import pytest

from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.answer_sets.reach import generator_need, generator_share, highest_level, reach_line
from conformal_rag_plugins.core.quantile import check_miss_bound, flagged_rank


@pytest.mark.parametrize(
    ("level", "split"),
    [
        (0.6, SplitOptions()),
        (0.3, SplitOptions(alpha_retrieval=0.1)),
        (0.3, SplitOptions(alpha_retrieval=0.1, generator_miss_bound=0.5)),
        (0.2, SplitOptions(method="hmp")),
    ],
)
def test_the_need_is_the_flag_rules_own(level: float, split: SplitOptions) -> None:
    n = 195
    need = generator_need(n, level, split)
    a_gen = generator_share(round(1 - level, 12), split)
    bound = check_miss_bound(split.generator_miss_bound, a_gen)
    rank = flagged_rank(n, a_gen, bound)
    assert (need.alpha_generation, need.miss_bound) == (a_gen, bound)
    assert need.max_misses == rank.max_misses
    assert need.ceiling == pytest.approx(1 - min(bound, rank.max_misses / n))
    assert need.ceiling > 1 - a_gen  # the old pilot's target, which the flag never met


def test_a_held_out_bound_reaches_lower_ceilings_than_the_default() -> None:
    held_out = SplitOptions(optimise=True, generator_miss_bound="held-out")
    default = SplitOptions(optimise=True)
    for level in (0.6, 0.3, 0.2):
        assert generator_need(200, level, held_out).ceiling < generator_need(200, level, default).ceiling
    # a 0.46 ceiling: nothing with the default bound, up to 0.42 with a held-out one (195 questions)
    assert highest_level(0.46, 195, default) is None
    top = highest_level(0.46, 195, held_out)
    assert top is not None and 0.3 < top.confidence_level < 0.46 and top.ceiling <= 0.46
    above = generator_need(195, round(top.confidence_level + 0.01, 2), held_out)
    assert above.ceiling is None or above.ceiling > 0.46  # the next level up is out of reach


def test_too_few_questions_say_so_and_the_line_names_the_rule() -> None:
    need = generator_need(5, 0.9, SplitOptions())
    assert need.ceiling is None and "too few questions" in need.describe()
    held_out = SplitOptions(optimise=True, generator_miss_bound="held-out")
    line = reach_line(195, 0.3, held_out, 0.46)
    top = highest_level(0.46, 195, held_out)
    assert line.startswith("generator reach under rule 'pool-miss-2': confidence_level 0.3")
    assert line.endswith(
        f"reaches confidence levels up to {top.confidence_level:g} (alpha_gen {top.alpha_generation:.3g}, miss bound "
        f"{top.miss_bound:.3g})"
    )
