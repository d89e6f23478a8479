"""MAPIE-style estimator that turns candidate pools into a :class:`RetrievalCalibration`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..core.errors import CalibrationError, NotFittedError
from ..core.pools import PoolObservation, choose_family
from ..core.quantile import conformal_quantile, min_calibration_size, pac_quantile
from ..core.recall_pools import choose_recall_family
from ..core.retrieval_scores import SCORE_FAMILIES
from ..core.validation import check_alpha
from ..datasets.examples import split_examples
from .calibration import RetrievalCalibration
from .fingerprint import Fingerprint
from .groups import GroupBy, with_groups
from .recall_calibration import CONTROLS, recall_method, recall_threshold


def _question_ids(obs: Sequence[PoolObservation]) -> tuple[str, ...]:
    """The observations' question ids (empty unless every one has one), refusing a repeated question."""
    if not all(o.question_id for o in obs):
        return ()
    ids = tuple(str(o.question_id) for o in obs)
    if len(set(ids)) != len(ids):
        raise CalibrationError(
            f"{len(ids) - len(set(ids))} calibration question(s) appear more than once (same id and text): a "
            "repeated question counts twice in the threshold. Drop the duplicates, or give them distinct ids."
        )
    return ids


def optimisation_ids(opt: Sequence[Any], cal: Sequence[Any]) -> list[str]:
    """The distinct optimisation-split question ids (``question_id`` or ``digest``) not in the calibration split.

    >>> from conformal_rag_plugins.evaluation.retrieval_trials import PoolObservation
    >>> obs = [PoolObservation([0.5], (0,), question_id=q) for q in "aab"]
    >>> optimisation_ids(obs[:2], obs[2:]), optimisation_ids(obs, obs[2:])
    (['a'], ['a'])
    """

    def ident(x: Any) -> str:
        return str(x.question_id if isinstance(x, PoolObservation) else x.digest)

    seen = {ident(x) for x in cal}
    return [q for q in dict.fromkeys(ident(x) for x in opt) if q not in seen]


def _gold_ranks(obs: Sequence[PoolObservation], pool_size: int) -> tuple[int | None, ...]:
    """The 1-based pool position of each observation's best gold candidate (``None`` for a miss).

    A rank beyond ``pool_size`` raises :class:`CalibrationError`: the host returned a larger pool
    than the calibration says it queries with.
    """
    ranks = tuple(min(o.gold_positions) + 1 if o.gold_positions else None for o in obs)
    worst = max((r for r in ranks if r is not None), default=0)
    if worst > pool_size:
        raise CalibrationError(
            f"A gold candidate is ranked {worst}, beyond pool_size={pool_size}: the host returned more candidates "
            "than the pool it is calibrated for. Configure the host to return pool_size candidates, or pass "
            "the pool it returns as pool_size."
        )
    return ranks


class RetrievalConformalizer:
    """Calibrate a retrieval threshold from per-question candidate pools.

    Parameters
    ----------
    confidence_level : float, default 0.9
        Target probability that the gold chunk is in the set (``1 - alpha``).
    score : {"relative", "similarity", "rank", "auto"}, default "relative"
        Nonconformity family. ``auto`` chooses on a seeded optimisation split
        (``optimisation_fraction``) and calibrates on the disjoint rest.
    method : {"split", "pac"}
        ``pac`` gives miscoverage <= 1-confidence_level with probability >= 1-delta.
    delta : float, optional
        Required for ``pac``.
    strict : bool, default False
        When misses (score ``+inf``) push the rank onto ``+inf`` or no PAC rank exists: ``False``
        returns ``+inf`` (keep the pool) with an :class:`InfiniteThresholdWarning`, ``True`` raises
        :class:`CalibrationError`. ``n < min_calibration_size(alpha)`` always raises.
    control : {"coverage", "recall"}, default "coverage"
        ``recall`` controls ``E[1 - recall] <= alpha`` by conformal risk control (``method="split"``
        or ``"crc"``), or ``P(E[1 - recall] <= alpha) >= 1 - delta`` by Learn-then-Test
        (``"pac"`` or ``"ltt"``). Every gold chunk counts, in the pool or not (``PoolObservation.n_gold``).

    Examples
    --------
    >>> import numpy as np
    >>> from conformal_rag_plugins.core import PoolObservation
    >>> from conformal_rag_plugins import Fingerprint
    >>> obs = [PoolObservation(np.array([1.0, 0.5 - i / 100]), (1,)) for i in range(20)]
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalConformalizer(0.9).conformalize(obs, fingerprint=fp, pool_size=2).calibration_
    >>> round(cal.threshold_, 2)  # scores 0.50..0.69 (n = 20): the ceil(21 * 0.9) = 19th smallest
    0.68
    """

    def __init__(
        self,
        confidence_level: float = 0.9,
        *,
        score: str = "relative",
        method: str = "split",
        delta: float | None = None,
        optimisation_fraction: float = 0.3,
        random_state: int = 0,
        strict: bool = False,
        control: str = "coverage",
    ) -> None:
        self.control = control
        self.confidence_level = confidence_level
        self.score = score
        self.method = method
        self.delta = delta
        self.optimisation_fraction = optimisation_fraction
        self.random_state = random_state
        self.strict = strict

    def _check_params(self) -> float:
        alpha = 1.0 - check_alpha(self.confidence_level, "confidence_level")
        alpha = check_alpha(round(alpha, 12))
        if self.score not in (*SCORE_FAMILIES, "auto"):
            raise CalibrationError(f"score must be one of {(*SCORE_FAMILIES, 'auto')}, got {self.score!r}.")
        if self.control not in CONTROLS:
            raise CalibrationError(f"control must be one of {CONTROLS}, got {self.control!r}.")
        if self.control == "recall":
            if recall_method(self.method) == "ltt":
                if self.delta is None:
                    raise CalibrationError("method='ltt' needs delta, e.g. delta=0.1.")
                check_alpha(self.delta, "delta")
            return alpha
        if self.method not in ("split", "pac"):
            raise CalibrationError(f"method must be 'split' or 'pac', got {self.method!r}.")
        if self.method == "pac":
            if self.delta is None:
                raise CalibrationError("method='pac' needs delta, e.g. delta=0.1.")
            check_alpha(self.delta, "delta")
        return alpha

    def conformalize(
        self,
        observations: Sequence[PoolObservation],
        *,
        fingerprint: Fingerprint,
        pool_size: int,
        groups: Sequence[str] | None = None,
        group_by: GroupBy = "group",
        group_fallback: str = "keep_all",
    ) -> RetrievalConformalizer:
        """Compute the threshold; the result is in ``calibration_``.

        With ``groups`` (each observation's group) it also holds per-group (Mondrian) thresholds;
        ``group_by`` records how they were made; ``group_fallback`` (``"keep_all"`` or ``"pooled"``,
        not guaranteed) is what a too-small or unseen group gets.

        Raises
        ------
        CalibrationError
            No observations, fewer than the finite-sample rank needs, or (``strict``) a too-small group.
        """
        alpha = self._check_params()
        obs = list(observations)
        if not obs:
            raise CalibrationError("No calibration examples were given; pass at least one labelled question.")
        if groups is not None and len(groups) != len(obs):
            raise CalibrationError(f"{len(groups)} group labels for {len(obs)} observations: give one per question.")
        selection: dict[str, Any] = {}
        family = self.score
        kept = list(range(len(obs)))
        if family == "auto":
            # split positions, not observations: the same seeded split, and the groups follow it
            opt_at, kept = split_examples(
                kept, (self.optimisation_fraction, 1 - self.optimisation_fraction), seed=self.random_state
            )
            opt, cal = [obs[i] for i in opt_at], [obs[i] for i in kept]
            family = choose_recall_family(opt, alpha) if self.control == "recall" else choose_family(opt, alpha)
            selection = {
                "rule": "auto",
                "n_optimisation": len(opt),
                "seed": self.random_state,
                "chosen": family,
            }
            if all(o.question_id for o in opt):  # the questions that chose the family: a held-out check skips them
                selection["optimisation_question_ids"] = optimisation_ids(opt, cal)
            obs = cal
        need = min_calibration_size(alpha)
        if len(obs) < need:
            raise CalibrationError(
                f"{len(obs)} calibration points are too few for alpha={alpha:g}: the finite-sample rank "
                f"ceil((n+1)(1-alpha)) exceeds n. Use at least {need} examples (after any optimisation split) "
                "or lower confidence_level."
            )
        if self.control == "recall" and groups is not None:
            raise CalibrationError(
                "Per-group (Mondrian) thresholds are not available with control='recall' yet: calibrate one recall "
                "threshold per group on that group's questions, or drop group_by."
            )
        if self.control == "recall":
            self.calibration_ = self._recall_calibration(obs, alpha, family, fingerprint, pool_size, selection)
            return self
        scores = [o.score(family) for o in obs]
        if self.method == "split":
            q = conformal_quantile(scores, alpha, strict=self.strict)
        else:
            assert self.delta is not None
            q = pac_quantile(scores, alpha, self.delta, strict=self.strict)
        self.calibration_ = RetrievalCalibration(
            threshold_=q,
            alpha_=alpha,
            method_=self.method,
            score_family_=family,
            pool_size_=int(pool_size),
            n_calibration_=len(obs),
            n_misses_=sum(1 for s in scores if math.isinf(s)),
            scores_=tuple(scores),
            fingerprint_=fingerprint,
            delta_=self.delta if self.method == "pac" else None,
            selection_=selection,
            question_ids_=_question_ids(obs),
            gold_ranks_=_gold_ranks(obs, int(pool_size)),
        )
        if groups is not None:
            labels = [groups[i] for i in kept]
            self.calibration_ = with_groups(
                self.calibration_, labels, group_by, strict=self.strict, fallback=group_fallback
            )
        return self

    def _recall_calibration(
        self,
        obs: list[PoolObservation],
        alpha: float,
        family: str,
        fingerprint: Fingerprint,
        pool_size: int,
        selection: dict[str, Any],
    ) -> RetrievalCalibration:
        gold = tuple(tuple(float(g) for g in o.gold_scores(family)) for o in obs)
        method = recall_method(self.method)
        delta = self.delta if method == "ltt" else None
        scores = tuple(g[0] for g in gold)
        return RetrievalCalibration(
            threshold_=recall_threshold(gold, alpha, method, delta, strict=self.strict),
            alpha_=alpha,
            method_=method,
            score_family_=family,
            pool_size_=int(pool_size),
            n_calibration_=len(obs),
            n_misses_=sum(1 for s in scores if math.isinf(s)),
            scores_=scores,
            fingerprint_=fingerprint,
            delta_=delta,
            selection_=selection,
            question_ids_=_question_ids(obs),
            gold_ranks_=_gold_ranks(obs, int(pool_size)),
            risk_="recall",
            gold_scores_=gold,
        )

    @property
    def threshold_(self) -> float:
        """Shortcut to ``calibration_.threshold_``."""
        return self.calibration.threshold_

    @property
    def calibration(self) -> RetrievalCalibration:
        """The fitted calibration, or :class:`NotFittedError`."""
        if not hasattr(self, "calibration_"):
            raise NotFittedError("This RetrievalConformalizer is not fitted yet: call conformalize(...) first.")
        return self.calibration_
