"""MAPIE-style estimator that turns candidate pools into a :class:`RetrievalCalibration`."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.errors import CalibrationError, NotFittedError, PoolMissWarning
from ..core.pool_misses import pool_miss_advice
from ..core.pools import PoolObservation, choose_family
from ..core.quantile import check_miss_bound, conformal_quantile, min_calibration_size, pac_quantile
from ..core.recall_pools import choose_recall_family
from ..core.retrieval_scores import SCORE_FAMILIES
from ..core.validation import DEFAULT_CONFIDENCE_LEVEL, alpha_from_confidence_level, check_alpha
from ..datasets.examples import CalibrationExample, split_examples
from ..runtime.caller_warning import warn_at_caller
from .calibration import RetrievalCalibration
from .corpus_filter import corpus_record
from .fingerprint import Fingerprint
from .group_check import with_group_questions
from .groups import GroupBy, with_groups
from .host import RetrievalHost, observe_host
from .options import RetrievalOptions
from .recall_calibration import CONTROLS, recall_method, recall_threshold

logger = logging.getLogger("conformal_rag_plugins")


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
    miss_bound : float, optional
        The share of questions the pool may miss that a flagged set assumes (``None``: ``alpha / 2``;
        ``0``: a pool that cannot miss, the plain rank). Recorded in the calibration.

    Examples
    --------
    >>> import numpy as np
    >>> from conformal_rag_plugins.core.pools import PoolObservation
    >>> from conformal_rag_plugins import Fingerprint
    >>> obs = [PoolObservation(np.array([1.0, 0.5 - i / 100]), (1,)) for i in range(20)]
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalConformalizer(0.9).conformalize_pools(obs, fingerprint=fp, pool_size=2).calibration_
    >>> round(cal.threshold_, 2)  # scores 0.50..0.69 (n = 20): rank 20, since the pool may miss (flagged_rank)
    0.69

    On a host (an adapter's reader, or any :class:`~.host.RetrievalHost`) with labelled questions:

    >>> conformalizer = RetrievalConformalizer(0.9, score="similarity")
    >>> cal = conformalizer.conformalize(LlamaIndexHost.of(index), examples).calibration_  # doctest: +SKIP
    """

    def __init__(
        self,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
        *,
        score: str = "relative",
        method: str = "split",
        delta: float | None = None,
        optimisation_fraction: float = 0.3,
        random_state: int = 0,
        strict: bool = False,
        control: str = "coverage",
        miss_bound: float | None = None,
    ) -> None:
        self.control = control
        self.miss_bound = miss_bound
        self.confidence_level = confidence_level
        self.score = score
        self.method = method
        self.delta = delta
        self.optimisation_fraction = optimisation_fraction
        self.random_state = random_state
        self.strict = strict

    @classmethod
    def from_options(cls, options: RetrievalOptions) -> RetrievalConformalizer:
        """The conformalizer that ``options`` describe (its group settings apply in :meth:`conformalize`).

        >>> RetrievalConformalizer.from_options(RetrievalOptions(0.8, score="rank")).score
        'rank'
        """
        return cls(
            options.confidence_level,
            score=options.family(),
            method=options.method,
            delta=options.delta,
            optimisation_fraction=options.optimisation_fraction,
            random_state=options.random_state,
            strict=options.strict,
            control=options.control,
            miss_bound=options.miss_bound,
        )

    def _check_params(self) -> float:
        alpha = alpha_from_confidence_level(self.confidence_level)
        if self.score not in (*SCORE_FAMILIES, "auto"):
            raise CalibrationError(f"score must be one of {(*SCORE_FAMILIES, 'auto')}, got {self.score!r}.")
        if self.control not in CONTROLS:
            raise CalibrationError(f"control must be one of {CONTROLS}, got {self.control!r}.")
        check_miss_bound(self.miss_bound, alpha)
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
        host: RetrievalHost,
        examples: Sequence[CalibrationExample],
        *,
        group_by: GroupBy | None = None,
        group_fallback: str = "keep_all",
        chunk_group_key: str | None = None,
        progress: bool = False,
    ) -> RetrievalConformalizer:
        """Query ``host`` once per labelled example and compute the threshold into ``calibration_``.

        The fingerprint, pool size and corpus record come from the host, per-group (Mondrian)
        thresholds from ``group_by`` (a metadata key or a function of the question) or
        ``chunk_group_key`` (a metadata key of the chunks: label-conditional thresholds).
        ``group_fallback`` (``"keep_all"`` or ``"pooled"``, not guaranteed) is what a too-small or
        unseen group gets. Pools already observed go in through :meth:`conformalize_pools`.

        Raises
        ------
        CalibrationError
            Not a host, no examples, fewer than the finite-sample rank needs, or (``strict``) a
            too-small group; bad settings are refused before the host is queried.
        ConformalError
            Both ``group_by`` and ``chunk_group_key``; a gold id the store does not hold.
        """
        self._check_params()  # bad settings are refused before the host is queried
        if not isinstance(host, RetrievalHost):
            raise CalibrationError(
                f"conformalize(host, examples) takes a host (an adapter's reader or a RetrievalHost), got "
                f"{type(host).__name__}: pools already observed go in through "
                "conformalize_pools(observations, fingerprint=..., pool_size=...)."
            )
        seen = observe_host(host, examples, group_by=group_by, chunk_group_key=chunk_group_key, progress=progress)
        self._fit(
            seen.observations,
            seen.fingerprint,
            seen.pool_size,
            seen.group_labels,
            chunk_group_key or group_by or "group",
            group_fallback,
        )
        cal = self._recorded(self.calibration_, seen.labels, chunk_group_key, group_by, seen.group_labels)
        # grouped by a function: record its inputs, so that a query-time group_by can be rerun on them
        cal = with_group_questions(cal, examples, group_by)
        self.calibration_ = replace(cal, corpus_=corpus_record(seen.all_ids))
        return self

    def conformalize_pools(
        self,
        observations: Sequence[PoolObservation],
        *,
        fingerprint: Fingerprint,
        pool_size: int,
        groups: Sequence[str] | None = None,
        group_by: GroupBy | None = None,
        group_fallback: str = "keep_all",
    ) -> RetrievalConformalizer:
        """Compute the threshold from candidate pools already observed (one per question) into ``calibration_``.

        ``fingerprint`` and ``pool_size`` describe the host the pools came from. With ``groups`` (each
        observation's group) it also holds per-group (Mondrian) thresholds and ``group_by`` records
        how they were made; ``group_fallback`` is what a too-small or unseen group gets.

        Raises
        ------
        CalibrationError
            No observations, fewer than the finite-sample rank needs, or (``strict``) a too-small group.
        """
        self._fit(list(observations), fingerprint, pool_size, groups, group_by or "group", group_fallback)
        return self

    def _recorded(
        self,
        cal: RetrievalCalibration,
        labels: dict[str, Any] | None,
        chunk_group_key: str | None,
        group_by: GroupBy | None,
        group_labels: Sequence[str] | None,
    ) -> RetrievalCalibration:
        """``cal`` with its chunk group key and gold labels recorded; logs kept misses, warns of a pool that misses."""
        if chunk_group_key is not None:
            if group_labels is None or group_by is not None:
                raise CalibrationError("chunk_group_key needs the gold chunks' group labels and no group_by.")
            cal = replace(cal, chunk_group_key_=chunk_group_key)
        if labels:
            cal = replace(cal, labels_=dict(labels))
            fallback = labels.get("gold_rule", {}).get("all-chunks-fallback", 0)
            if fallback:
                logger.warning(
                    "%d calibration question(s) had no chunk containing a reference answer; every chunk of "
                    "their document counts as gold (all-chunks-fallback).",
                    fallback,
                )
        if cal.n_misses_:
            logger.warning(
                "%d of %d calibration questions had no gold chunk in the top-%d pool; they are kept as misses "
                "(score +inf), not dropped.",
                cal.n_misses_,
                cal.n_calibration_,
                cal.pool_size_,
            )
        if math.isinf(cal.threshold_):
            logger.warning("The calibrated threshold is +inf: every candidate in the pool will be returned.")
        return cal

    def _fit(
        self,
        obs: list[PoolObservation],
        fingerprint: Fingerprint,
        pool_size: int,
        groups: Sequence[str] | None,
        group_by: GroupBy,
        group_fallback: str,
    ) -> None:
        alpha = self._check_params()
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
            return
        scores = [o.score(family) for o in obs]
        if self.method == "split":
            q = conformal_quantile(scores, alpha, strict=self.strict, miss_bound=self.miss_bound)
        else:
            assert self.delta is not None
            q = pac_quantile(scores, alpha, self.delta, strict=self.strict, miss_bound=self.miss_bound)
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
            miss_bound_=self._recorded_bound(),
        )
        if groups is not None:
            labels = [groups[i] for i in kept]
            self.calibration_ = with_groups(
                self.calibration_, labels, group_by, strict=self.strict, fallback=group_fallback
            )
        self._warn_pool_misses(self.calibration_)

    def _warn_pool_misses(self, cal: RetrievalCalibration) -> None:
        """Warn :class:`PoolMissWarning` when the pool, or a group's, misses more than the bound the flag assumes."""
        advice = pool_miss_advice(
            cal.n_misses_,
            cal.n_calibration_,
            cal.alpha_,
            cal.pool_size_,
            miss_bound=cal.miss_bound_,
            flagged=math.isfinite(cal.threshold_),
        )
        if advice is not None:
            warn_at_caller(advice, PoolMissWarning)
        for group, record in sorted(cal.groups_.items()):
            at = [i for i, g in enumerate(cal.group_labels_) if g == group]
            misses = sum(1 for i in at if math.isinf(cal.scores_[i]))
            flagged = record["source"] == "group" and math.isfinite(float(record["threshold"]))
            advice = pool_miss_advice(
                misses, len(at), cal.alpha_, cal.pool_size_, miss_bound=cal.miss_bound_, flagged=flagged
            )
            if advice is not None:
                warn_at_caller(f"Group {group!r}: {advice}", PoolMissWarning)

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
            threshold_=recall_threshold(gold, alpha, method, delta, strict=self.strict, miss_bound=self.miss_bound),
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
            miss_bound_=self._recorded_bound(),
        )

    def _recorded_bound(self) -> float | None:
        """The ``miss_bound`` a calibration records: ``None`` (the default ``alpha / 2``) or the given float."""
        return None if self.miss_bound is None else float(self.miss_bound)

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


def calibrate_from_pools(
    observations: Sequence[PoolObservation],
    *,
    fingerprint: Fingerprint,
    pool_size: int,
    options: RetrievalOptions | None = None,
    labels: dict[str, Any] | None = None,
    group_labels: Sequence[str] | None = None,
) -> RetrievalCalibration:
    """Calibrate observed pools with ``options``, record ``labels`` (:func:`~.pool_calibration.label_counts`).

    ``group_labels`` are the observations' groups (:func:`~.groups.group_labels`) or, with
    ``options.chunk_group_key``, their gold chunks' groups (label-conditional, see
    :func:`~.groups.with_chunk_groups`).

    >>> import numpy as np
    >>> obs = [PoolObservation(np.array([1.0, 0.5 - i / 100]), (1,)) for i in range(20)]
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = calibrate_from_pools(obs, fingerprint=fp, pool_size=2, options=RetrievalOptions(score="similarity"))
    >>> cal.score_family_
    'similarity'
    """
    opts = options if options is not None else RetrievalOptions()
    group_by, chunk_group_key = opts.group_by, opts.chunk_group_key
    conformalizer = RetrievalConformalizer.from_options(opts)
    conformalizer._fit(
        list(observations), fingerprint, pool_size, group_labels, chunk_group_key or group_by or "group",
        opts.group_fallback,
    )  # fmt: skip
    return conformalizer._recorded(conformalizer.calibration_, labels, chunk_group_key, group_by, group_labels)


def calibrate_on_host(
    host: RetrievalHost, examples: Sequence[CalibrationExample], options: RetrievalOptions | None = None
) -> RetrievalCalibration:
    """Calibrate the conformal retrieval threshold by querying ``host`` once per example.

    The one retrieval calibration flow, with the settings passed whole: both adapters'
    ``calibrate_retriever`` (and LangChain's ``calibrate_compressor``) build their reader and call
    it; it is :meth:`RetrievalConformalizer.conformalize` with the conformalizer ``options`` describe.
    The package exports it as ``conformal_rag_plugins.calibrate_host``.

    Parameters
    ----------
    host : RetrievalHost
        An adapter's reader (``LlamaIndexHost``, ``LangChainHost``) or any object with the protocol.
    examples : sequence of CalibrationExample
        Labelled questions; ``host.prepare_gold`` puts their gold on the host's unit and checks it.
    options : RetrievalOptions, optional
        Level, score family (default ``"relative"``), method, groups, control, progress bar.

    Returns
    -------
    RetrievalCalibration
        With the host's fingerprint, ``pool_size_ = host.pool_size`` and the corpus record of ``host.all_ids()``.

    Raises
    ------
    ConformalError
        Both ``group_by`` and ``chunk_group_key``; a gold id the store does not hold.

    Examples
    --------
    >>> cal = calibrate_on_host(LlamaIndexHost.of(index), examples, RetrievalOptions(0.9))  # doctest: +SKIP
    """
    opts = options if options is not None else RetrievalOptions()
    fitted = RetrievalConformalizer.from_options(opts).conformalize(
        host,
        examples,
        group_by=opts.group_by,
        group_fallback=opts.group_fallback,
        chunk_group_key=opts.chunk_group_key,
        progress=opts.progress,
    )
    return fitted.calibration_
