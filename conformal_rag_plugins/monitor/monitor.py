"""``ConformalMonitor``: label-free drift alarm on live queries, tied to one calibration.

Each query's statistic gets a smoothed conformal p-value against the reference plus earlier queries, fed
to a Simple Jumper test martingale: under exchangeability P(ever ``M_t >= 1/delta``) <= ``delta``
(Ville). A restart follows an alarm, and restart ``k`` tests at ``delta / 2**k`` *given everything
before it*: its bag is the reference plus every earlier query (``"continued"``: the p-values after the
restart are then fresh uniforms, independent of the alarm that caused it), or a fresh reference the user
draws after the alarm (``"fresh"``). Reusing the first reference alone, as states saved before schema 3
did (``"initial"``), does not: after a false alarm that reference is biased, and the restarted run
false-alarmed at 0.17 instead of 0.05 (delta 0.1). Two numbers follow. Without drift a false alarm ever
has probability <= ``delta`` (the first run's; the restarts never happen). Over all runs, for instance a
false alarm before a real drift and another after its restart, the union bound gives ``delta + delta/2 +
delta/4 + ... < 2 * delta``; the restarted runs alone stay below ``delta``. Create the monitor at
``delta / 2`` for ``delta`` in every case. Labels add an anytime-valid coverage sequence and ACI (Gibbs
and Candès, 2021). The state is checked, optionally signed JSON, replayed on load. See
docs/production/monitor.md.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import CalibrationError, CalibrationIntegrityError, ConformalError
from ..core.martingale import (
    STATISTICS,
    OnlineConformalTest,
    check_delta,
    check_statistics,
    query_statistic,
    restart_delta,
    strangeness,
)
from ..core.mondrian import check_group_label
from ..core.online_coverage import aci_miss, aci_next_alpha, aci_threshold, coverage_confidence_sequence
from ..core.retrieval_scores import keep_mask
from ..retrieval.calibrated_unit import calibration_unit
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.groups import query_threshold, threshold_for
from ..retrieval.parent_pools import parent_unit_name
from ..storage.jsonio import (
    SIGNING_KEY_ENV,
    check_signature,
    naming_file,
    read_json,
    resolve_signing_key,
    sign,
    verify,
    with_checksum,
    write_json,
)
from ..storage.jsonio import decode_float as _dec
from ..storage.jsonio import encode_float as _enc
from ..storage.schema import check_fields
from .schema import MonitorFile

#: Schema 2 adds the runs (restarts), the group of each label, ``grouped`` and the signature; schema 3 the
#: reference of each run (a restart's bag: ``"continued"`` or ``"fresh"`` with its values; ``"initial"`` before).
MONITOR_SCHEMA_VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)
_KIND = "conformal_rag_plugins.conformal_monitor"
#: What scores a monitor watches: the pool the retriever serves (fed by the retriever itself), or the raw dense
#: similarities behind a fusion host (its served scores are normalised per query, so their top-1 cannot move;
#: the caller feeds them). See docs/production/monitor.md, "Which scores".
SCORE_SOURCES = ("served", "dense")
#: ``from_observations(groups=...)`` default: the groups the calibration recorded.
_FROM_CALIBRATION = "calibration"


def calibration_identity(calibration: RetrievalCalibration) -> dict[str, Any]:
    """What ties a monitor to a calibration: fingerprint, threshold, alpha, family and file checksum."""
    if hasattr(calibration, "retrieval_stage"):
        calibration = calibration.retrieval_stage()
    return {
        "fingerprint": calibration.fingerprint_.to_dict(),
        "threshold": _enc(calibration.threshold_),
        "alpha": calibration.alpha_,
        "score_family": calibration.score_family_,
        "checksum": calibration.to_dict()["checksum"],
    }


def served_threshold(calibration: RetrievalCalibration | Any, group: str | None) -> float:
    """The threshold served to a query of ``group``: its group's (or the fallback) if per-group, else the pooled one."""
    if getattr(calibration, "groups_", None):
        return threshold_for(calibration, group)[0]
    return float(calibration.threshold_)


def monitor_statistic(
    statistic: str, scores: Sequence[float] | np.ndarray, calibration: RetrievalCalibration | Any, group: str | None
) -> float:
    """One query's raw drift statistic for reference and stream alike (``scores`` best first, at the served
    unit); ``set_size`` is taken at :func:`served_threshold` before ``min_k``/``max_k``.
    """
    size = None
    if statistic == "set_size":
        size = int(keep_mask(calibration.score_family_, scores, served_threshold(calibration, group)).sum())
    return query_statistic(statistic, scores, size)


@dataclass(frozen=True)
class ServedScores:
    """One query's candidate scores as a ``ConformalRetriever`` serves them: the monitor's input.

    Returned by ``ConformalRetriever.pool_scores(question)`` (both frameworks), so a reference built
    from the calibration questions is computed exactly like the stream.

    Attributes
    ----------
    scores : tuple of float
        Best first, after a small-to-big retriever's parent aggregation.
    unit : str
        ``"chunk"`` or ``"parent:<aggregation>"``.
    group : str or None
        The query's group for a per-group calibration (``None``: the pooled threshold).

    Examples
    --------
    >>> ServedScores((0.9, 0.7)).unit
    'chunk'
    """

    scores: tuple[float, ...]
    unit: str = "chunk"
    group: str | None = None

    @classmethod
    def of_query(
        cls,
        calibration: RetrievalCalibration | Any,
        scores: Iterable[float],
        query: str,
        *,
        group: str | None,
        group_by: Any,
        parent_how: str | None,
    ) -> ServedScores:
        """A pool's scores with its unit (``parent_how``: small-to-big aggregation) and served group."""
        _, meta = query_threshold(calibration, group, group_by, query)
        unit = "chunk" if parent_how is None else parent_unit_name(parent_how)
        return cls(tuple(float(s) for s in scores), unit, meta.get("conformal_group"))

    @classmethod
    def of_drop_in(
        cls, drop_in: Any, scores: Iterable[float], query: str, parent: Any = None, group: str | None = None
    ) -> ServedScores:
        """:meth:`of_query` with a retriever drop-in's calibration, options and parent level; ``group`` overrides."""
        opts, how = drop_in.options, None if parent is None else parent.how
        group = opts.group if group is None else group
        return cls.of_query(drop_in.calibration, scores, query, group=group, group_by=opts.group_by, parent_how=how)


@dataclass(frozen=True)
class MonitorUpdate:
    """What one query did: ``index`` (0-based over every run), the current run's ``martingale`` ``M_t``
    (``inf`` past float range; the log is kept), ``alarm`` (the current run has alarmed, now or earlier).
    """

    index: int
    statistic: float
    p_value: float
    martingale: float
    alarm: bool


@dataclass(frozen=True)
class CoverageTracking:
    """Labelled-query settings: ``coverage_delta`` (default: the monitor's ``delta``) and the ACI step ``aci_gamma``."""

    coverage_delta: float | None = None
    aci_gamma: float = 0.005


#: The default ``coverage=`` of :class:`ConformalMonitor`.
DEFAULT_COVERAGE_TRACKING = CoverageTracking()


#: How a run's bag begins: the first reference (the first run; restarts saved before schema 3), the reference
#: plus every earlier query, or a fresh reference given to :meth:`ConformalMonitor.restart`.
RUN_REFERENCES = ("initial", "continued", "fresh")


@dataclass
class _Run:
    """One run of the drift test: the first, or one begun by a restart after an alarm (``reference``: its bag)."""

    start: int
    test: OnlineConformalTest
    started_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    reference: str = "initial"
    reference_values: tuple[float, ...] | None = None

    @property
    def alarm_at(self) -> int | None:
        return None if self.test.alarm_at is None else self.start + self.test.alarm_at


class ConformalMonitor:
    """Drift alarm with a false-alarm probability of at most ``delta`` over the whole stream (without restarts).

    After restarts, all runs together false-alarm with probability below ``2 * delta`` (see the module).

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
        The calibration the monitored retriever uses.
    reference : iterable of float
        Each reference question's raw statistic, computed like the stream's (:meth:`from_observations`),
        from the live query population: every question, answerable or not.
    statistic : {"top1", "gap", "set_size"}, default "top1"
        ``top1`` (best score) and ``gap`` (best minus second) are exchangeable when the questions are;
        ``set_size`` uses the fitted threshold, which slightly favours the calibration questions:
        prefer a reference of questions not used for the threshold.
    delta : float, default 0.01
        False-alarm probability of the first run (alarm at ``M_t >= 1/delta``); restart ``k`` uses ``delta / 2**k``.
    jump : float, default 0.01
        Simple Jumper switching rate.
    seed : int, default 0
        Seed of the p-values' tie-breaking uniforms (saved; query ``i`` draws the ``i``-th in every run and replay).
    coverage : CoverageTracking, optional
        ``coverage_delta`` (default ``delta``) and ``aci_gamma`` (default 0.005) for labelled queries.
    grouped : bool, optional
        Per-group calibration: the retriever serves each query its group's threshold (default) or the
        pooled one (``False``); set sizes or labels served the other way are refused.
    score_source : {"served", "dense"}, default "served"
        Whose scores the statistic is taken from (saved in the state). ``"served"``: the pool the
        retriever serves, which feeds the monitor itself. ``"dense"``: the raw dense similarities of the
        same question on the same collection, for a **fusion** host, whose served scores are normalised per
        query (z-score, min-max) and so keep their top-1 in place under a shift; the caller passes them to
        :meth:`observe` (a retriever refuses to feed such a monitor). ``set_size`` needs ``"served"``.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, tuple(i / 10 for i in range(1, 10)), fp)
    >>> mon = ConformalMonitor(cal, reference=[0.8, 0.7, 0.9, 0.85, 0.75], delta=0.05)
    >>> mon.observe([0.8, 0.6]).p_value > 0, mon.alarm
    (True, False)
    """

    def __init__(
        self,
        calibration: RetrievalCalibration | Any,
        *,
        reference: Iterable[float],
        statistic: str = "top1",
        delta: float = 0.01,
        jump: float = 0.01,
        seed: int = 0,
        coverage: CoverageTracking = DEFAULT_COVERAGE_TRACKING,
        grouped: bool | None = None,
        score_source: str = "served",
    ) -> None:
        coverage_delta, aci_gamma = coverage.coverage_delta, coverage.aci_gamma
        if score_source not in SCORE_SOURCES:
            raise ConformalError(f"score_source must be one of {', '.join(SCORE_SOURCES)}, got {score_source!r}.")
        if score_source != "served" and statistic == "set_size":
            raise ConformalError(
                f"statistic='set_size' needs the served scores (the set is taken at the calibrated threshold), not "
                f"score_source={score_source!r}: monitor 'top1' or 'gap' of the dense similarities instead."
            )
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        if statistic not in STATISTICS:
            raise ConformalError(f"Unknown drift statistic {statistic!r}; choose one of {', '.join(STATISTICS)}.")
        if not (isinstance(aci_gamma, int | float) and math.isfinite(aci_gamma) and aci_gamma > 0):
            raise ConformalError(f"aci_gamma must be a positive number, got {aci_gamma!r}.")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ConformalError(f"seed must be a non-negative integer, got {seed!r}.")
        if statistic == "set_size" and getattr(calibration, "chunk_group_key_", None):
            raise ConformalError(
                "statistic='set_size' is not available for a per-chunk-group calibration "
                f"(chunk_group_key={calibration.chunk_group_key_!r}): each chunk is kept against its own group's "
                "threshold, so the set size depends on the chunks' groups. Monitor 'top1' or 'gap' instead."
            )
        has_groups = bool(getattr(calibration, "groups_", None))
        if grouped and not has_groups:
            raise ConformalError("grouped=True needs a per-group calibration: calibrate with group_by=... first.")
        self.calibration = calibration
        self.statistic = statistic
        self._record_statistic = True
        self._record_calibration = True
        self.score_source = score_source
        self.grouped = has_groups if grouped is None else bool(grouped)
        self.reference = check_statistics(reference, "calibration statistic")
        self.coverage_delta = check_delta(coverage_delta if coverage_delta is not None else delta, "coverage_delta")
        self.aci_gamma = float(aci_gamma)
        self.identity = calibration_identity(calibration)
        self.created_at = datetime.now(timezone.utc).isoformat()
        self._strange = [strangeness(statistic, v) for v in self.reference]
        first = OnlineConformalTest(self._strange, delta=delta, jump=jump, seed=int(seed))
        self._runs: list[_Run] = [_Run(0, first, self.created_at)]
        self.stream: list[float] = []
        self.labels: list[tuple[bool, float | None]] = []
        self.label_groups: list[str | None] = []  # the group each label was served (None: pooled / unknown)
        self.aci_alpha = float(calibration.alpha_)
        self.aci_errors: list[bool] = []  # err_t of every label with a nonconformity
        self._lock = threading.RLock()
        self._verified: list[Any] = [calibration]  # calibration objects already checked (kept alive: id reuse)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_observations(
        cls,
        calibration: RetrievalCalibration | Any,
        observations: Sequence[Any],
        *,
        groups: Sequence[str | None] | str | None = _FROM_CALIBRATION,
        unit: str | None = None,
        **kwargs: Any,
    ) -> ConformalMonitor:
        """Build the monitor from the reference questions' pools (statistics by :func:`monitor_statistic`).

        Parameters
        ----------
        calibration : RetrievalCalibration or AnswerSetCalibration
        observations : sequence
            Per question (every question of the live population): a :class:`ServedScores` from
            ``ConformalRetriever.pool_scores(question)``, a ``PoolObservation`` of the calibration, or a
            list of host scores (any order).
        groups : sequence of str, None or "calibration", default "calibration"
            Per-group calibrations: each observation's group (its set size is taken at that group's
            threshold). ``"calibration"`` reads it from each :class:`ServedScores` or the calibration's
            record of the question; ``None``: a retriever without groups (pooled threshold).
        unit : str, optional
            Unit of plain score lists: ``"chunk"`` (default), or ``"parent:max"``/``"parent:sum"`` to
            confirm parent scores for a parent-level calibration.
        **kwargs
            The other arguments of :class:`ConformalMonitor`.

        Raises
        ------
        ConformalError
            Scores at another unit than the calibration's, or a ``set_size`` reference with unknown groups.

        Examples
        --------
        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
        >>> scores = tuple(i / 10 for i in range(1, 10))
        >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, scores, fp)
        >>> ConformalMonitor.from_observations(cal, [[0.5, 0.9], [0.7, 0.2]]).reference
        [0.9, 0.7]
        """
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        statistic = kwargs.get("statistic", "top1")
        items = list(observations)
        want = calibration_unit(calibration)
        if unit is not None and unit != want:
            raise ConformalError(_unit_mismatch(want, unit))
        scores_of = [_observation_scores(o, want, unit) for o in items]
        labels, grouped = _reference_groups(calibration, items, groups, statistic)
        if "grouped" in kwargs and kwargs["grouped"] is not None and bool(kwargs["grouped"]) != grouped:
            raise ConformalError(
                f"grouped={kwargs['grouped']} contradicts groups= ({'per group' if grouped else 'pooled'})."
            )
        kwargs["grouped"] = grouped
        reference = [monitor_statistic(statistic, s, calibration, g) for s, g in zip(scores_of, labels, strict=True)]
        return cls(calibration, reference=reference, **kwargs)

    # ------------------------------------------------------------------ properties
    @property
    def delta(self) -> float:
        """False-alarm probability of the current run (``base_delta / 2**restarts``)."""
        return self._runs[-1].test.delta

    @property
    def base_delta(self) -> float:
        """The ``delta`` the monitor was created with (the first run's)."""
        return self._runs[0].test.delta

    @property
    def threshold(self) -> float:
        """The alarm level ``1/delta`` of the current run's martingale."""
        return 1.0 / self.delta

    @property
    def jump(self) -> float:
        """Simple Jumper switching rate."""
        return self._runs[0].test.martingale.jump

    @property
    def seed(self) -> int:
        """Seed of the tie-breaking uniforms (fixed at creation)."""
        return self._runs[0].test.seed

    @property
    def restarts(self) -> int:
        """How many times the monitor was restarted after an alarm."""
        return len(self._runs) - 1

    @property
    def runs(self) -> list[dict[str, Any]]:
        """Every run: ``{"start", "delta", "alarm_at", "started_at", "reference"}`` (stream indices 0-based, global).

        ``reference`` is how the run's bag begins (:data:`RUN_REFERENCES`); a ``"fresh"`` run also lists its
        ``reference_values``.
        """
        with self._lock:
            return [_run_record(r) for r in self._runs]

    @property
    def alarms(self) -> list[int]:
        """The stream index of every alarm raised, one per run that alarmed."""
        with self._lock:
            return [r.alarm_at for r in self._runs if r.alarm_at is not None]

    @property
    def n_stream(self) -> int:
        """Queries observed (over every run)."""
        return len(self.stream)

    @property
    def alarm_at(self) -> int | None:
        """0-based stream index of the query that raised the current run's alarm, or ``None``."""
        return self._runs[-1].alarm_at

    @property
    def alarm(self) -> bool:
        """Whether the current run has raised the drift alarm."""
        return self._runs[-1].test.alarm_at is not None

    @property
    def p_values(self) -> list[float]:
        """The p-value of each observed query (every run)."""
        with self._lock:
            return [p for r in self._runs for p in r.test.p_values]

    @property
    def log_martingale(self) -> list[float]:
        """``log M_t`` after each query, of the run the query belongs to."""
        with self._lock:
            return [v for r in self._runs for v in r.test.log_path]

    @property
    def martingale(self) -> list[float]:
        """``M_t`` after each query (``inf`` beyond float range)."""
        return [_exp(v) for v in self.log_martingale]

    # ------------------------------------------------------------------ updates
    def check_calibration(self, calibration: RetrievalCalibration | Any) -> None:
        """Raise unless ``calibration`` is this monitor's: ``FingerprintMismatchError`` for another pipeline,
        :class:`CalibrationError` for another calibration of the same pipeline.
        """
        if any(calibration is c for c in self._verified):
            return
        other = calibration_identity(calibration)
        if other != self.identity:
            from ..retrieval.fingerprint import Fingerprint

            Fingerprint.from_dict(self.identity["fingerprint"]).check_compatible(
                Fingerprint.from_dict(other["fingerprint"])
            )
            raise CalibrationError(
                "This monitor belongs to another calibration (threshold "
                f"{self.identity['threshold']} at alpha={self.identity['alpha']}, checksum "
                f"{self.identity['checksum'][:12]}...; got threshold {other['threshold']} at alpha={other['alpha']}, "
                f"checksum {other['checksum'][:12]}...): its statistics are not comparable. Build a new monitor "
                "for the new calibration."
            )
        with self._lock:
            self._verified.append(calibration)

    def _served_group(self, group: Any, what: str) -> str | None:
        """The query's group, checked against how the reference was served (``what`` names it in errors)."""
        has_groups = bool(getattr(self.calibration, "groups_", None))
        if group is not None:
            if not has_groups:
                raise ConformalError("group= needs a per-group calibration: this calibration has one threshold.")
            group = check_group_label(group, " (group=)")
        if has_groups and (group is not None) != self.grouped:
            if self.grouped:
                raise ConformalError(
                    f"This monitor watches a per-group retriever, but the {what} came without the query's group: "
                    "pass group= (the group the retriever served), or build the monitor with groups=None "
                    "(grouped=False) for a retriever used without groups."
                )
            raise ConformalError(
                f"This monitor's reference was served the pooled threshold (groups=None), but the {what} was served "
                f"the threshold of group {group!r}: the two are not comparable. Build the monitor with the "
                "calibration's groups (the default) for a per-group retriever."
            )
        return group

    def observe(
        self,
        scores: Sequence[float] | np.ndarray,
        *,
        set_size: int | None = None,
        calibration: Any = None,
        group: str | None = None,
    ) -> MonitorUpdate:
        """Update with one query's candidate scores (best first).

        The statistic is :func:`monitor_statistic` for ``group`` (the group whose threshold was served).
        ``set_size`` must agree with it and ``calibration`` must be the monitor's (the retrievers pass both).
        """
        if calibration is not None:
            self.check_calibration(calibration)
            if self.score_source != "served":
                raise ConformalError(self.not_served_message())
        if self.statistic == "set_size":
            group = self._served_group(group, "set size")
        elif group is not None:
            group = check_group_label(group, " (group=)")
        value = monitor_statistic(self.statistic, scores, self.calibration, group)
        if self.statistic == "set_size" and set_size is not None and int(set_size) != value:
            raise ConformalError(
                f"The query's set size {set_size} is not the {int(value)} of its scores at the threshold "
                f"{served_threshold(self.calibration, group)} served for "
                f"{'group ' + repr(group) if group is not None else 'it'}: the reference holds set sizes at that "
                "threshold."
            )
        return self.observe_statistic(value)

    def not_served_message(self) -> str:
        """Why a retriever must not feed this monitor its served scores (``score_source`` is not ``"served"``)."""
        return (
            f"This monitor watches the {self.score_source} similarities behind the fusion "
            f"(score_source={self.score_source!r}), not the served scores: do not attach it to the retriever; "
            "feed it yourself with monitor.observe(scores) of the dense retriever for each query."
        )

    def observe_statistic(self, value: float) -> MonitorUpdate:
        """Update with one query's raw statistic (computed elsewhere with :func:`monitor_statistic`)."""
        value = check_statistics([value])[0]
        with self._lock:
            run = self._runs[-1]
            p = run.test.update(strangeness(self.statistic, value))
            self.stream.append(value)
            return MonitorUpdate(len(self.stream) - 1, value, p, _exp(run.test.log_path[-1]), self.alarm)

    def restart(
        self, reference: Iterable[float] | None = None, *, observations: Sequence[Any] | None = None
    ) -> ConformalMonitor:
        """Begin a new run after an alarm (else :class:`ConformalError`), testing at ``delta / 2**k`` for restart ``k``.

        Its martingale starts at 1 and the uniforms continue from the stream position. Its level holds *given
        everything before the restart*, the alarm included:

        - without ``reference`` (after a false alarm, or to keep testing against everything seen): the bag is
          the reference plus **every earlier query**, so the test goes on where it stopped. When nothing
          drifted, the p-values after the restart are uniforms independent of the earlier ones, and the new
          run false-alarms at most ``delta / 2**k`` given the first alarm. After a real drift the drifted
          queries stay in the bag: restart with a fresh reference instead.
        - ``reference``: fresh raw statistics (:func:`monitor_statistic` of questions from the calibration
          population **not** used by the monitor before, e.g. drawn after the alarm): the bag is these plus
          the run's own queries, independent of the alarm that caused the restart.
        - ``observations``: the same from those questions' pools (``retriever.pool_scores(question)``, as
          :meth:`from_observations` takes them), turned into statistics like the stream's.

        Reusing the first reference (what restarts did before schema 3) is not offered: after a false alarm
        that reference is atypical, and the restarted run false-alarmed at two to three times its level.
        Halving ``delta`` keeps the restarted runs together below ``delta``, and all runs, the first
        included, below ``2 * delta``.
        """
        if observations is not None:
            if reference is not None:
                raise ConformalError("Pass restart(reference=...) or restart(observations=...), not both.")
            reference = self._fresh_statistics(observations)
        values = None if reference is None else tuple(check_statistics(reference, "fresh reference statistic"))
        if values is not None and not values:
            raise ConformalError("restart(reference=...) needs at least one fresh reference statistic.")
        with self._lock:
            if not self.alarm:
                raise ConformalError(
                    "The monitor has not raised an alarm: there is nothing to restart (every restart halves "
                    "the false-alarm level delta of the runs after it)."
                )
            self._begin_run(reference="continued" if values is None else "fresh", values=values)
        return self

    def _fresh_statistics(self, observations: Sequence[Any]) -> list[float]:
        """A fresh reference's statistics from its pools, served like this monitor's reference."""
        items = list(observations)
        want = calibration_unit(self.calibration)
        scores_of = [_observation_scores(o, want, None) for o in items]
        groups = _FROM_CALIBRATION if self.grouped else None
        labels, grouped = _reference_groups(self.calibration, items, groups, self.statistic)
        if items and grouped != self.grouped:
            raise ConformalError(
                "The fresh reference was served the pooled threshold, but this monitor watches a per-group "
                "retriever: pass the ServedScores of retriever.pool_scores(question)."
            )
        pairs = zip(scores_of, labels, strict=True)
        return [monitor_statistic(self.statistic, s, self.calibration, g) for s, g in pairs]

    def _begin_run(
        self, started_at: str | None = None, *, reference: str, values: Sequence[float] | None = None
    ) -> None:
        k = len(self._runs)
        first = self._runs[0].test
        if reference == "fresh":
            if not values:
                raise CalibrationIntegrityError(f"Run {k} has a fresh reference without its values.")
            bag = [strangeness(self.statistic, v) for v in values]
        elif values is not None:
            raise CalibrationIntegrityError(f"Run {k} lists reference values but its reference is {reference!r}.")
        elif reference == "continued":
            bag = self._strange + [strangeness(self.statistic, v) for v in self.stream]
        elif reference == "initial":
            bag = self._strange
        else:
            raise CalibrationIntegrityError(f"Run {k} has an unknown reference {reference!r}.")
        test = OnlineConformalTest(
            bag,
            delta=restart_delta(first.delta, k),
            jump=first.martingale.jump,
            seed=first.seed,
            first_step=len(self.stream),
        )
        run = _Run(len(self.stream), test, reference=reference)
        if values is not None:
            run.reference_values = tuple(float(v) for v in values)
        if started_at is not None:
            run.started_at = started_at
        self._runs.append(run)

    def observe_label(
        self, covered: bool | None = None, *, nonconformity: float | None = None, group: str | None = None
    ) -> ConformalMonitor:
        """Record a label for a served query.

        Parameters
        ----------
        covered : bool, optional
            Whether the returned set held a gold chunk (user feedback, a judge).
        nonconformity : float, optional
            The gold chunk's nonconformity (``+inf``: not in the pool). It sets ``covered`` (finite and
            ``<=`` the threshold served for ``group``) and drives ACI (``err_t``: the set at the current
            :attr:`aci_alpha` missed; a gold outside the pool misses even at a ``+inf`` threshold).
            Without it only the coverage sequence moves.
        group : str, optional
            Per-group calibration: the query's group, whose threshold judges the hit (``None``: pooled).
        """
        if nonconformity is not None:
            group = self._served_group(group, "label")
            r = float(nonconformity)
            if math.isnan(r):
                raise ConformalError("A NaN nonconformity label; pass the gold chunk's score or +inf for a miss.")
            threshold = served_threshold(self.calibration, group)
            hit = not aci_miss(r, threshold)
            if covered is not None and bool(covered) != hit:
                raise ConformalError(
                    f"covered={covered} contradicts nonconformity {r} against the threshold {threshold}."
                )
            covered = hit
        elif group is not None:
            group = self._served_group(group, "label")
        if covered is None:
            raise ConformalError("Pass covered=True/False or the gold's nonconformity.")
        with self._lock:
            self._add_label(bool(covered), None if nonconformity is None else float(nonconformity), group)
        return self

    def _add_label(self, covered: bool, nonconformity: float | None, group: str | None = None) -> None:
        if nonconformity is not None:
            miss = aci_miss(nonconformity, aci_threshold(self.calibration.scores_, self.aci_alpha))
            self.aci_alpha = aci_next_alpha(self.aci_alpha, self.calibration.alpha_, self.aci_gamma, miss)
            self.aci_errors.append(miss)
            covered = covered and math.isfinite(nonconformity)  # older files: covered at a +inf threshold
        self.labels.append((covered, nonconformity))
        self.label_groups.append(group)

    @property
    def aci_miss_rate(self) -> float:
        """Share of labels with a nonconformity whose ACI set missed (``nan`` before any); a gold outside the
        pool misses even at ``alpha_t <= 0``, so staying above ``alpha`` means the pool itself is too small.
        """
        with self._lock:
            return sum(self.aci_errors) / len(self.aci_errors) if self.aci_errors else math.nan

    def coverage_interval(self) -> tuple[float, float]:
        """Anytime-valid ``1 - coverage_delta`` interval for the realised coverage of the labelled queries."""
        with self._lock:
            hits = sum(1 for c, _ in self.labels if c)
            return coverage_confidence_sequence(hits, len(self.labels), self.coverage_delta)

    def aci_threshold(self) -> float:
        """The ACI threshold at the current :attr:`aci_alpha` (``+inf``: keep all; ``-inf``: empty set)."""
        return aci_threshold(self.calibration.scores_, self.aci_alpha)

    def summary(self) -> str:
        """One line for logs."""
        log_path = self._runs[-1].test.log_path
        m = log_path[-1] if log_path else 0.0
        alarm = f"ALARM at query {self.alarm_at}" if self.alarm else "no alarm"
        restarts = f", {self.restarts} restart(s)" if self.restarts else ""
        return (
            f"{self.statistic} monitor: {self.n_stream} queries, martingale {_exp(m):.3g} "
            f"(alarm at {self.threshold:g}), {alarm}{restarts}, {len(self.labels)} labels"
        )

    # ------------------------------------------------------------------ JSON
    def to_dict(self, *, signing_key: str | bytes | None = None) -> dict[str, Any]:
        """JSON-ready state with version and SHA-256 checksum; HMAC-signed only with an explicit ``signing_key``."""
        with self._lock:
            payload = {
                "kind": _KIND,
                "schema_version": MONITOR_SCHEMA_VERSION,
                "statistic": self.statistic,
                "delta": self.base_delta,
                "coverage_delta": self.coverage_delta,
                "jump": self.jump,
                "aci_gamma": self.aci_gamma,
                "seed": self.seed,
                "calibration": dict(self.identity),
                "grouped": self.grouped,
                "reference": [_enc(v) for v in self.reference],
                "stream": [_enc(v) for v in self.stream],
                "p_values": self.p_values,
                "log_martingale": self.log_martingale,
                "alarm_at": self.alarm_at,
                "runs": self.runs,
                "labels": [
                    {"covered": c, "nonconformity": None if r is None else _enc(r), "group": g}
                    for (c, r), g in zip(self.labels, self.label_groups, strict=True)
                ],
                "aci_alpha": self.aci_alpha,
                "created_at": self.created_at,
            }
            if self._record_statistic:  # a second record of the statistic: an edit of either is refused
                payload["reference_statistic"] = self.statistic
            payload["score_source"] = self.score_source
            # the state is one unit with its calibration: it resumes without the calibration file
            if self._record_calibration and isinstance(self.calibration, RetrievalCalibration):
                payload["calibration_record"] = self.calibration.to_dict()
        key = resolve_signing_key(signing_key) if signing_key is not None else None
        return with_checksum(sign(payload, key))

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], calibration: RetrievalCalibration | Any, *, signing_key: str | bytes | None = None
    ) -> ConformalMonitor:
        """Verify a :meth:`to_dict` state for ``calibration``, replay it and check every stored value.

        With ``signing_key`` an unsigned or wrongly signed state is refused (anybody can recompute a
        checksum after cutting the stream or changing ``delta``); so is a schema 1 state, which otherwise
        loads with a :class:`UserWarning`.

        Raises
        ------
        CalibrationIntegrityError
            Wrong kind, version, checksum, signature or field; or a stored p-value, martingale value,
            alarm, run ``delta`` or ACI level that the replay does not reproduce.
        FingerprintMismatchError, CalibrationError
            The file belongs to another calibration.
        """
        version = _verify_state(data)["schema_version"]
        if signing_key is not None:
            _check_monitor_signature(data, resolve_signing_key(signing_key))
        check_fields(MonitorFile, data, "drift monitor")
        base = float(data["delta"])
        runs = data.get("runs") or [
            {"start": 0, "delta": base, "alarm_at": data["alarm_at"], "started_at": str(data["created_at"])}
        ]
        mon = cls(
            calibration,
            reference=[_dec(v) for v in data["reference"]],
            statistic=data["statistic"],
            delta=base,
            jump=data["jump"],
            seed=data["seed"],
            coverage=CoverageTracking(coverage_delta=data["coverage_delta"], aci_gamma=data["aci_gamma"]),
            grouped=bool(data.get("grouped", False)),  # schema 1 took set sizes at the pooled threshold
            score_source=data.get("score_source") or "served",  # before schema 3: the served scores
        )
        stored = dict(data["calibration"])
        if stored != mon.identity:
            mon.identity = stored
            mon._verified = []
            mon.check_calibration(calibration)  # raises, naming what differs
        mon.created_at = str(data["created_at"])
        mon._record_statistic = "reference_statistic" in data  # a re-saved older state keeps its checksum
        mon._record_calibration = "calibration_record" in data  # likewise for the carried calibration
        mon._runs[0].started_at = str(runs[0]["started_at"])
        _replay_runs(mon, [_dec(v) for v in data["stream"]], runs, base)
        groups = []
        for i, label in enumerate(data["labels"]):
            r = label.get("nonconformity")
            r = None if r is None else _dec(r)
            group = label.get("group")
            if version != 1 and r is not None:
                _check_label(mon, i, bool(label["covered"]), r, group)
            mon._add_label(bool(label["covered"]), r, group)
            groups.append(group)
        _same(mon.p_values, data["p_values"], "p-values")
        _same(mon.log_martingale, data["log_martingale"], "martingale values")
        if mon.alarm_at != data["alarm_at"]:
            raise CalibrationIntegrityError(
                f"The stored alarm_at {data['alarm_at']!r} disagrees with {mon.alarm_at!r} from the replayed stream."
            )
        if not math.isclose(mon.aci_alpha, float(data["aci_alpha"]), rel_tol=1e-9, abs_tol=1e-12):
            legacy = _legacy_aci_alpha(
                mon, [None if x.get("nonconformity") is None else _dec(x["nonconformity"]) for x in data["labels"]]
            )
            _same([legacy], [data["aci_alpha"]], "ACI alpha")
            warnings.warn(
                "This monitor was saved by a version that counted a gold chunk outside the pool as covered "
                f"when the ACI threshold was +inf; its ACI level is replayed as {mon.aci_alpha!r} instead of the "
                f"stored {data['aci_alpha']!r}.",
                UserWarning,
                stacklevel=2,
            )
        if version == 1:
            _warn_schema_1(mon)
        return mon

    def save(self, path: str | Path, *, signing_key: str | bytes | None = None) -> Path:
        """Write the state as JSON (never pickle), atomically; signed if a key or ``$CONFORMAL_RAG_SIGNING_KEY`` is set.

        Only an HMAC signature, checked by :meth:`load` with the key, proves the state unedited (no stream cut
        before its alarm, no other ``delta``, no erased alarm).
        """
        return write_json(path, self.to_dict(signing_key=resolve_signing_key(signing_key)))

    @classmethod
    def load(
        cls,
        path: str | Path,
        calibration: RetrievalCalibration | Any = None,
        *,
        signing_key: str | bytes | None = None,
    ) -> ConformalMonitor:
        """Read, verify and replay a :meth:`save` file; refused for another calibration, or unsigned when a key is set.

        Without ``calibration`` the state's own (:meth:`saved_calibration`) is used: a state is one unit
        with the calibration it was made with.

        Examples
        --------
        >>> mon = ConformalMonitor.load("monitor.json", cal)  # doctest: +SKIP
        >>> mon = ConformalMonitor.load("monitor.json")  # its own calibration  # doctest: +SKIP
        """
        with naming_file(path):
            key = resolve_signing_key(signing_key)
            data = _verify_state(read_json(path))
            if calibration is None:
                calibration = _embedded_calibration(data, key)
            return cls.from_dict(data, calibration, signing_key=key)

    @classmethod
    def saved_calibration(cls, path: str | Path, *, signing_key: str | bytes | None = None) -> RetrievalCalibration:
        """The retrieval calibration a :meth:`save` file carries (checked like the file itself).

        Raises
        ------
        CalibrationError
            A state saved before states carried their calibration (pass the calibration file).
        CalibrationIntegrityError
            A tampered state or calibration record.
        """
        with naming_file(path):
            return _embedded_calibration(_verify_state(read_json(path)), resolve_signing_key(signing_key))


def _embedded_calibration(data: dict[str, Any], key: bytes | None) -> RetrievalCalibration:
    """The calibration record of a verified state (its signature checked first when a key is given)."""
    if key is not None:
        _check_monitor_signature(data, key)
    record = data.get("calibration_record")
    if record is None:
        raise CalibrationError(
            "This drift monitor state was saved before states carried their calibration: pass the calibration "
            "it was made with (ConformalMonitor.load(path, calibration); on the command line --calibration)."
        )
    calibration = RetrievalCalibration.from_dict(record)
    if calibration_identity(calibration) != dict(data["calibration"]):
        raise CalibrationIntegrityError(
            "The drift monitor's embedded calibration is not the calibration its identity names."
        )
    return calibration


def _unit_mismatch(want: str, got: str) -> str:
    if want == "chunk":
        return (
            f"This calibration is chunk-level, but the reference scores are {got} scores: build the reference "
            "from the chunk scores its retriever serves (retriever.pool_scores(question))."
        )
    return (
        f"This calibration is parent-level ({want}): its retriever serves the monitor parent scores "
        f"aggregated from the chunks, so the reference must hold the same. Build it with "
        f"retriever.pool_scores(question) on the parent-level ConformalRetriever, or pass unit={want!r} "
        f"if these lists already hold parent scores (got {got})."
    )


def _observation_scores(item: Any, want: str, unit: str | None) -> np.ndarray:
    """Best-first scores of one reference item, refusing scores at another unit than the calibration's."""
    if isinstance(item, ServedScores):
        if item.unit != want:
            raise ConformalError(_unit_mismatch(want, item.unit))
    elif not hasattr(item, "gold_positions") and unit is None and want != "chunk":
        raise ConformalError(_unit_mismatch(want, "plain (presumably chunk)"))
    return -np.sort(-np.asarray(getattr(item, "scores", item), dtype=float))


def _reference_groups(
    cal: Any, items: Sequence[Any], groups: Sequence[str | None] | str | None, statistic: str
) -> tuple[list[str | None], bool]:
    """The group each reference item was served, and whether the monitored retriever serves per group."""
    has_groups = bool(getattr(cal, "groups_", None))
    n = len(items)
    if groups is None:
        return [None] * n, False
    if isinstance(groups, str):
        if groups != _FROM_CALIBRATION:
            raise ConformalError(f"groups must be a sequence of group labels, None or 'calibration', got {groups!r}.")
        if not has_groups:
            return [None] * n, False
        of_question = dict(zip(cal.question_ids_, cal.group_labels_, strict=False)) if cal.question_ids_ else {}
        labels: list[str | None] = []
        for o in items:
            if isinstance(o, ServedScores):
                labels.append(o.group)
            else:
                qid = getattr(o, "question_id", None)
                labels.append(of_question.get(str(qid)) if qid is not None else None)
        if items and all(isinstance(o, ServedScores) and o.group is None for o in items):
            return labels, False  # every question served the pooled threshold: a retriever without groups
    else:
        if not has_groups and any(g is not None for g in groups):
            raise ConformalError("groups= needs a per-group calibration: this calibration has one threshold.")
        labels = [None if g is None else check_group_label(g, f" (groups[{i}])") for i, g in enumerate(groups)]
        if len(labels) != n:
            raise ConformalError(f"{len(labels)} groups for {n} reference observations.")
        if not has_groups:
            return labels, False
    missing = [i for i, g in enumerate(labels) if g is None]
    if statistic == "set_size" and missing:
        raise ConformalError(
            f"The set_size reference needs the group of every question (a per-group retriever serves each its "
            f"group's threshold), but {len(missing)} of {n} have none (first: observation {missing[0]}): pass "
            "groups=[...] (one per observation), the ServedScores of retriever.pool_scores(question), or "
            "groups=None for a retriever used without groups."
        )
    return labels, True


def _check_monitor_signature(data: dict[str, Any], key: bytes | None) -> None:
    """The shared HMAC check (:func:`~.jsonio.check_signature`), with the monitor's own words."""
    if key is None:
        return
    if not isinstance(data.get("signature"), str):
        raise CalibrationIntegrityError(
            f"The drift monitor state is not signed, but a signing key is set (argument or ${SIGNING_KEY_ENV}): "
            "only signed states are accepted (an unsigned one may have been cut before its alarm). Load it "
            "without the key and save it with the key to sign it, if you trust it."
        )
    try:
        check_signature(data, key)
    except CalibrationIntegrityError:
        raise CalibrationIntegrityError(
            "The drift monitor state's signature does not match the signing key: it was edited (a stream cut "
            "before its alarm, another delta, an erased alarm) or signed with another key."
        ) from None


def _verify_state(data: Any) -> dict[str, Any]:
    """Check a state's kind, version (any readable one) and checksum."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    return verify(data, _KIND, version if version in _READABLE_VERSIONS else MONITOR_SCHEMA_VERSION)


def _run_record(run: _Run) -> dict[str, Any]:
    """One run as saved: start, level, alarm, start time, how its bag begins (and a fresh reference's values)."""
    out = {
        "start": run.start,
        "delta": run.test.delta,
        "alarm_at": run.alarm_at,
        "started_at": run.started_at,
        "reference": run.reference,
    }
    if run.reference_values is not None:
        out["reference_values"] = [_enc(v) for v in run.reference_values]
    return out


def _replay_runs(mon: ConformalMonitor, stream: Sequence[float], runs: Sequence[dict[str, Any]], base: float) -> None:
    """Replay every run: each restart must follow an alarm, and run ``k`` must test at ``base / 2**k``.

    A run without ``reference`` (schema 2) restarted from the first reference alone: replayed so, with a warning.
    """
    legacy = [k for k, run in enumerate(runs) if k and run.get("reference", "initial") == "initial"]
    if legacy:
        warnings.warn(
            f"Run(s) {', '.join(map(str, legacy))} of this drift monitor state restarted from the first reference "
            "alone (before schema 3): after a false alarm such a run false-alarms well above its delta / 2**k. "
            "They are replayed as they ran; the next restart continues the bag or takes a fresh reference.",
            UserWarning,
            stacklevel=4,
        )
    for k, run in enumerate(runs):
        want = restart_delta(base, k)
        if not math.isclose(float(run["delta"]), want, rel_tol=1e-12, abs_tol=0.0):
            raise CalibrationIntegrityError(
                f"Run {k} records delta {run['delta']!r}, but after {k} restart(s) of a monitor created at "
                f"delta={base!r} it is {want!r}: the file was edited."
            )
        if k:
            if not mon.alarm:
                raise CalibrationIntegrityError(
                    f"Run {k} starts at query {run['start']}, but the run before it raised no alarm on replay: "
                    "a restart only follows an alarm; the file was edited."
                )
            values = run.get("reference_values")
            mon._begin_run(
                str(run["started_at"]),
                reference=str(run.get("reference", "initial")),
                values=None if values is None else [_dec(v) for v in values],
            )
        end = runs[k + 1]["start"] if k + 1 < len(runs) else len(stream)
        for v in stream[int(run["start"]) : int(end)]:
            mon.observe_statistic(v)
        if mon.alarm_at != run["alarm_at"]:
            raise CalibrationIntegrityError(
                f"Run {k} records alarm_at {run['alarm_at']!r}, but its replay gives {mon.alarm_at!r}: "
                "the file was edited or corrupted."
            )


def _check_label(mon: ConformalMonitor, i: int, covered: bool, r: float, group: str | None) -> None:
    threshold = served_threshold(mon.calibration, group)
    if covered != (not aci_miss(r, threshold)):
        raise CalibrationIntegrityError(
            f"Label {i} says covered={covered}, but its nonconformity {r} against the threshold {threshold} served "
            f"for {'group ' + repr(group) if group is not None else 'it'} says otherwise: the file was edited."
        )


def _warn_schema_1(mon: ConformalMonitor) -> None:
    extra = ""
    if getattr(mon.calibration, "groups_", None):
        extra = (
            " Its set sizes were taken at the pooled threshold and its labels judged against it, so it is loaded "
            "as a monitor of a retriever without groups (a per-group retriever's set sizes and labels are "
            "refused): rebuild it for a per-group retriever."
        )
    warnings.warn(
        "This drift monitor state was saved before schema 2: it has no signature, so nothing proves that its "
        "stream was not cut before an alarm (the replay only proves it self-consistent). Save it again (with a "
        f"signing key) to write schema 2.{extra}",
        UserWarning,
        stacklevel=3,
    )


def _legacy_aci_alpha(mon: ConformalMonitor, nonconformities: Sequence[float | None]) -> float:
    """The ACI level older versions stored: they did not count a miss at a ``+inf`` threshold (``inf > inf``)."""
    alpha = float(mon.calibration.alpha_)
    for r in nonconformities:
        if r is not None:
            miss = r > aci_threshold(mon.calibration.scores_, alpha)
            alpha = aci_next_alpha(alpha, mon.calibration.alpha_, mon.aci_gamma, miss)
    return alpha


def _exp(log_value: float) -> float:
    return math.exp(log_value) if log_value < 709.0 else math.inf


def _same(replayed: Sequence[float], stored: Sequence[float], what: str) -> None:
    for i, (a, b) in enumerate(zip(replayed, stored, strict=True)):
        if not math.isclose(a, float(b), rel_tol=1e-9, abs_tol=1e-12):
            raise CalibrationIntegrityError(
                f"The stored {what} disagree with the replayed stream at query {i} ({b!r} stored, {a!r} replayed): "
                "the file was edited or corrupted."
            )
