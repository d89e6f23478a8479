"""How a repeated random-split evaluation draws its splits (one frozen option object).

Every trial shuffles the questions with one generator seeded by ``seed``; the first
``calibration_fraction`` of them calibrate (of which the first ``optimisation_fraction``
choose a setting, where a protocol tunes one), the rest are the test part. Functions that
take the same :class:`RandomSplits` draw the same splits, so their results can be compared
split by split.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RandomSplits:
    """The random calibration/test splits of a repeated-split evaluation.

    Attributes
    ----------
    trials : int, default 100
        Number of random splits.
    seed : int, default 0
        Seed of the permutations (``numpy.random.default_rng(seed)``).
    calibration_fraction : float, default 0.5
        Share of the questions in the calibration part (rounded); the rest is the test part.
    optimisation_fraction : float, default 0.3
        Share of the calibration part that chooses a setting before the threshold is fitted on
        the remainder (used by the tuned protocol and ``family="auto"``).

    Examples
    --------
    >>> RandomSplits(trials=5, seed=3)
    RandomSplits(trials=5, seed=3, calibration_fraction=0.5, optimisation_fraction=0.3)
    """

    trials: int = 100
    seed: int = 0
    calibration_fraction: float = 0.5
    optimisation_fraction: float = 0.3


#: The default of every ``splits=`` parameter: 100 trials, seed 0, half calibrates, 30% of that half optimises.
DEFAULT_SPLITS = RandomSplits()
