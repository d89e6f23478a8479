"""How a repeated random-split evaluation draws its splits (one frozen option object).

Functions given the same :class:`RandomSplits` draw the same splits, so results compare split by split.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RandomSplits:
    """The random calibration/test splits of a repeated-split evaluation.

    ``optimisation_fraction`` of the calibration part chooses a setting (tuned protocol,
    ``family="auto"``) before the threshold is fitted on the rest.

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
