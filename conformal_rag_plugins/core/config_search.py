"""Choose a host configuration (e.g. hybrid fusion method and weight) and a score family together.

The choice minimises the mean conformal set size on an *optimisation* split only.
Whoever calls :func:`choose_configuration` must compute the final threshold on a
disjoint calibration split; then the choice is a fixed function of data the
threshold never sees, and split-conformal validity is kept.

:func:`evaluate_tuned_splits` repeats the whole protocol (optimisation part of the
calibration half, threshold on the rest, coverage on the test half) over random
splits, for ``conformal-rag evaluate`` and the benchmarks.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ConformalError
from .quantile import conformal_quantile
from .retrieval_scores import SCORE_FAMILIES
from .retrieval_trials import PoolObservation, TrialSummary

__all__ = ["TuningChoice", "choose_configuration", "evaluate_tuned_splits"]


@dataclass(frozen=True)
class TuningChoice:
    """The chosen (configuration, family) and the mean set size of every candidate.

    Attributes
    ----------
    config : str
        Key of the chosen configuration.
    family : str
        Chosen nonconformity family.
    mean_sizes : dict
        ``{"config|family": mean set size on the optimisation split}``.
    n_optimisation : int
    """

    config: str
    family: str
    mean_sizes: dict[str, float]
    n_optimisation: int


def _check_aligned(observations: Mapping[str, Sequence[PoolObservation]]) -> int:
    if not observations:
        raise ConformalError("No configurations to choose from; pass at least one.")
    lengths = {key: len(obs) for key, obs in observations.items()}
    if len(set(lengths.values())) != 1:
        raise ConformalError(f"Every configuration needs one observation per question, got {lengths}.")
    n = next(iter(lengths.values()))
    if n == 0:
        raise ConformalError("The optimisation split is empty; use more calibration questions.")
    return n


def choose_configuration(
    observations: Mapping[str, Sequence[PoolObservation]],
    alpha: float,
    *,
    families: Sequence[str] = SCORE_FAMILIES,
) -> TuningChoice:
    """Pick the configuration and family with the smallest mean set on the optimisation split.

    Each candidate is scored by the split-conformal threshold at ``alpha`` computed
    *and* applied on the optimisation observations. Ties go to the earlier
    configuration (mapping order), then the earlier family.

    Parameters
    ----------
    observations : mapping of str to sequence of PoolObservation
        One aligned list per configuration (same questions, same order), optimisation split only.
    alpha : float
    families : sequence of str
        Candidate score families.

    Examples
    --------
    >>> good = [PoolObservation(np.array([0.9, 0.2]), (0,))] * 20
    >>> bad = [PoolObservation(np.array([0.9, 0.8]), (1,))] * 20
    >>> choice = choose_configuration({"w=0.3": bad, "w=0.7": good}, 0.1, families=("rank",))
    >>> choice.config, choice.mean_sizes
    ('w=0.7', {'w=0.3|rank': 2.0, 'w=0.7|rank': 1.0})
    """
    n = _check_aligned(observations)
    for fam in families:
        if fam not in SCORE_FAMILIES:
            raise ConformalError(f"Unknown score family {fam!r}; use one of {SCORE_FAMILIES}.")
    sizes: dict[str, float] = {}
    best: tuple[str, str] | None = None
    best_size = math.inf
    for key, obs in observations.items():
        for fam in families:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = conformal_quantile([o.score(fam) for o in obs], alpha)
            size = float(np.mean([o.covered_and_size(fam, q)[1] for o in obs]))
            sizes[f"{key}|{fam}"] = size
            if size < best_size:
                best, best_size = (key, fam), size
    assert best is not None
    return TuningChoice(best[0], best[1], sizes, n)


def evaluate_tuned_splits(
    observations: Mapping[str, Sequence[PoolObservation]],
    alpha: float,
    *,
    families: Sequence[str] = SCORE_FAMILIES,
    trials: int = 100,
    seed: int = 0,
    calibration_fraction: float = 0.5,
    optimisation_fraction: float = 0.3,
) -> tuple[TrialSummary, Counter[str]]:
    """Coverage and set size of the tuned protocol over random splits.

    Per trial: shuffle the questions; the first ``calibration_fraction`` is the
    calibration half, whose first ``optimisation_fraction`` chooses the
    configuration and family (:func:`choose_configuration`); the threshold uses the
    rest of the calibration half with the chosen configuration's scores, and
    coverage/size are measured on the test half with that configuration.

    Returns
    -------
    summary : TrialSummary
        Method name ``"tuned"``.
    choices : collections.Counter
        How often each ``"config|family"`` was chosen.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> obs = [PoolObservation(np.sort(rng.random(5))[::-1].copy(), (int(rng.integers(5)),)) for _ in range(60)]
    >>> summary, choices = evaluate_tuned_splits({"a": obs}, 0.2, families=("rank",), trials=5)
    >>> summary.method, sum(choices.values())
    ('tuned', 5)
    """
    n = _check_aligned(observations)
    rng = np.random.default_rng(seed)
    n_cal = round(n * calibration_fraction)
    n_opt = round(n_cal * optimisation_fraction)
    if n_opt < 1 or n_cal - n_opt < 1 or n - n_cal < 1:
        raise ConformalError(f"{n} questions are too few to split into optimisation, calibration and test parts.")
    choices: Counter[str] = Counter()
    coverages, mean_sizes, all_sizes = [], [], []
    for _ in range(trials):
        perm = rng.permutation(n)
        opt_idx, cal_idx, test_idx = perm[:n_opt], perm[n_opt:n_cal], perm[n_cal:]
        choice = choose_configuration(
            {k: [obs[i] for i in opt_idx] for k, obs in observations.items()}, alpha, families=families
        )
        chosen = observations[choice.config]
        choices[f"{choice.config}|{choice.family}"] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = conformal_quantile([chosen[i].score(choice.family) for i in cal_idx], alpha)
        results = [chosen[i].covered_and_size(choice.family, q) for i in test_idx]
        coverages.append(float(np.mean([c for c, _ in results])))
        mean_sizes.append(float(np.mean([s for _, s in results])))
        all_sizes.extend(s for _, s in results)
    return TrialSummary(alpha, "tuned", tuple(coverages), tuple(mean_sizes), tuple(all_sizes)), choices
