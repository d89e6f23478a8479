"""``ConformalMonitor``: watch live queries for drift away from the calibration, without labels.

Each query gives a label-free statistic (``top1``: the best candidate's host score;
``gap``: best minus second best; ``set_size``: the conformal set's size). Its smoothed
conformal p-value is computed against the same statistic on the calibration questions
plus every earlier query (:class:`~conformal_rag_plugins.core.martingale.OnlineConformalTest`)
and fed to the Simple Jumper test martingale. **Guarantee**: if the calibration questions
and the stream are exchangeable (no drift), the probability that the monitor *ever* raises
an alarm (``M_t >= 1/delta``) is at most ``delta``, over the whole stream (Ville's
inequality). After a drift, the martingale grows and the alarm says when.

With labels (user feedback, a judge, an audit), :meth:`ConformalMonitor.observe_label`
also tracks the realised coverage with an anytime-valid confidence sequence and runs
adaptive conformal inference (Gibbs and Candès, 2021), see
:mod:`~conformal_rag_plugins.core.online_coverage`.

The monitor is tied to one calibration (fingerprint, threshold, checksum): queries from a
retriever with another calibration, and a saved monitor loaded for another one, are
refused. Updates hold a lock, so one monitor can serve concurrent queries. Its state is
JSON (schema version, checksum); loading replays the stream and re-checks every p-value
and martingale value.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
    strangeness,
)
from ..core.online_coverage import aci_miss, aci_next_alpha, aci_threshold, coverage_confidence_sequence
from ..core.retrieval_scores import keep_mask
from .jsonio import decode_float as _dec
from .jsonio import encode_float as _enc
from .jsonio import read_checked, verify, with_checksum, write_json
from .monitor_schema import MonitorFile, check_fields
from .retrieval import RetrievalCalibration

__all__ = ["MONITOR_SCHEMA_VERSION", "ConformalMonitor", "MonitorUpdate", "calibration_identity"]

MONITOR_SCHEMA_VERSION = 1
_KIND = "conformal_rag_plugins.conformal_monitor"


def calibration_identity(calibration: RetrievalCalibration) -> dict[str, Any]:
    """What ties a monitor to a calibration: fingerprint, threshold, alpha, family and file checksum.

    Examples
    --------
    >>> from conformal_rag_plugins.calibration import Fingerprint
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, tuple(i / 10 for i in range(1, 10)), fp)
    >>> sorted(calibration_identity(cal))
    ['alpha', 'checksum', 'fingerprint', 'score_family', 'threshold']
    """
    if hasattr(calibration, "retrieval_stage"):
        calibration = calibration.retrieval_stage()
    return {
        "fingerprint": calibration.fingerprint_.to_dict(),
        "threshold": _enc(calibration.threshold_),
        "alpha": calibration.alpha_,
        "score_family": calibration.score_family_,
        "checksum": calibration.to_dict()["checksum"],
    }


@dataclass(frozen=True)
class MonitorUpdate:
    """What one query did to the monitor.

    Attributes
    ----------
    index : int
        0-based position of the query in the stream.
    statistic : float
    p_value : float
    martingale : float
        ``M_t`` (``inf`` if it overflowed a float; the monitor keeps its logarithm).
    alarm : bool
        Whether the alarm has been raised (now or earlier).
    """

    index: int
    statistic: float
    p_value: float
    martingale: float
    alarm: bool


class ConformalMonitor:
    """Drift alarm with a false-alarm probability of at most ``delta`` over the whole stream.

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
        The calibration the monitored retriever uses.
    reference : iterable of float
        The raw statistic (see ``statistic``) of each calibration question, through the same
        host; :meth:`from_observations` computes it from the calibration pools.
    statistic : {"top1", "gap", "set_size"}, default "top1"
        ``top1`` and ``gap`` are fixed functions of a query's host scores, so calibration and
        stream statistics are exchangeable when the questions are. ``set_size`` uses the
        threshold fitted on the calibration questions, so their own set sizes are slightly
        favoured; prefer a reference of questions not used for the threshold with it.
    delta : float, default 0.01
        False-alarm probability; the alarm is at ``M_t >= 1/delta``.
    jump : float, default 0.01
        Simple Jumper switching rate.
    seed : int, default 0
        Seed of the tie-breaking uniforms of the smoothed p-values.
    coverage_delta : float, optional
        Error of the coverage confidence sequence (default ``delta``).
    aci_gamma : float, default 0.005
        Step size of adaptive conformal inference.

    Examples
    --------
    >>> from conformal_rag_plugins.calibration import Fingerprint
    >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, tuple(i / 10 for i in range(1, 10)), fp)
    >>> mon = ConformalMonitor(cal, reference=[0.8, 0.7, 0.9, 0.85, 0.75], delta=0.05)
    >>> mon.observe([0.8, 0.6]).p_value > 0, mon.alarm
    (True, False)
    >>> mon.observe_label(True).coverage_interval() == (0.0, 1.0)
    False
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
        coverage_delta: float | None = None,
        aci_gamma: float = 0.005,
    ) -> None:
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        if statistic not in STATISTICS:
            raise ConformalError(f"Unknown drift statistic {statistic!r}; choose one of {', '.join(STATISTICS)}.")
        if not (isinstance(aci_gamma, int | float) and math.isfinite(aci_gamma) and aci_gamma > 0):
            raise ConformalError(f"aci_gamma must be a positive number, got {aci_gamma!r}.")
        self.calibration = calibration
        self.statistic = statistic
        self.reference = check_statistics(reference, "calibration statistic")
        self.coverage_delta = check_delta(coverage_delta if coverage_delta is not None else delta, "coverage_delta")
        self.aci_gamma = float(aci_gamma)
        self.identity = calibration_identity(calibration)
        self.created_at = datetime.now(timezone.utc).isoformat()
        self._test = OnlineConformalTest(
            [strangeness(statistic, v) for v in self.reference], delta=delta, jump=jump, seed=seed
        )
        self.stream: list[float] = []
        self.labels: list[tuple[bool, float | None]] = []
        self.aci_alpha = float(calibration.alpha_)
        self.aci_errors: list[bool] = []  # err_t of every label with a nonconformity
        self._lock = threading.RLock()
        self._verified: list[Any] = [calibration]  # calibration objects already checked (kept alive: id reuse)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_observations(
        cls, calibration: RetrievalCalibration | Any, observations: Sequence[Any], **kwargs: Any
    ) -> ConformalMonitor:
        """Build the reference from the calibration questions' pools (``PoolObservation`` or score lists).

        Each item is one calibration question's candidate scores as the host returned them (any
        order; they are sorted best first here), e.g. ``[n.score for n in host.retrieve(q)]``.

        Examples
        --------
        >>> from conformal_rag_plugins.calibration import Fingerprint
        >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
        >>> scores = tuple(i / 10 for i in range(1, 10))
        >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, scores, fp)
        >>> ConformalMonitor.from_observations(cal, [[0.5, 0.9], [0.7, 0.2]]).reference
        [0.9, 0.7]
        """
        if hasattr(calibration, "retrieval_stage"):
            calibration = calibration.retrieval_stage()
        statistic = kwargs.get("statistic", "top1")
        reference = [
            cls._statistic_of(statistic, -np.sort(-np.asarray(getattr(o, "scores", o), dtype=float)), calibration)
            for o in observations
        ]
        return cls(calibration, reference=reference, **kwargs)

    @staticmethod
    def _statistic_of(statistic: str, scores: np.ndarray, calibration: RetrievalCalibration) -> float:
        size = None
        if statistic == "set_size":
            size = int(keep_mask(calibration.score_family_, scores, calibration.threshold_).sum())
        return query_statistic(statistic, scores, size)

    # ------------------------------------------------------------------ properties
    @property
    def delta(self) -> float:
        """False-alarm probability of the drift alarm."""
        return self._test.delta

    @property
    def threshold(self) -> float:
        """The alarm level ``1/delta`` of the martingale."""
        return 1.0 / self._test.delta

    @property
    def jump(self) -> float:
        """Simple Jumper switching rate."""
        return self._test.martingale.jump

    @property
    def seed(self) -> int:
        """Seed of the tie-breaking uniforms."""
        return self._test.seed

    @property
    def n_stream(self) -> int:
        """Queries observed."""
        return self._test.n_stream

    @property
    def alarm_at(self) -> int | None:
        """0-based index of the query that first raised the alarm, or ``None``."""
        return self._test.alarm_at

    @property
    def alarm(self) -> bool:
        """Whether the drift alarm has been raised."""
        return self._test.alarm_at is not None

    @property
    def p_values(self) -> list[float]:
        """The p-value of each observed query."""
        return list(self._test.p_values)

    @property
    def log_martingale(self) -> list[float]:
        """``log M_t`` after each query."""
        return list(self._test.log_path)

    @property
    def martingale(self) -> list[float]:
        """``M_t`` after each query (``inf`` beyond float range)."""
        return [_exp(v) for v in self._test.log_path]

    # ------------------------------------------------------------------ updates
    def check_calibration(self, calibration: RetrievalCalibration | Any) -> None:
        """Raise unless ``calibration`` is the one this monitor was built for.

        Raises :class:`~conformal_rag_plugins.core.errors.FingerprintMismatchError` for another
        pipeline and :class:`CalibrationError` for another calibration of the same pipeline.
        """
        if any(calibration is c for c in self._verified):
            return
        other = calibration_identity(calibration)
        if other != self.identity:
            from .fingerprint import Fingerprint

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

    def observe(
        self, scores: Sequence[float] | np.ndarray, *, set_size: int | None = None, calibration: Any = None
    ) -> MonitorUpdate:
        """Update with one query's candidate scores (best first) and its conformal set size.

        ``calibration`` (what the retrievers pass) is checked to be the monitor's own.
        """
        if calibration is not None:
            self.check_calibration(calibration)
        if self.statistic == "set_size" and set_size is None:
            set_size = int(keep_mask(self.calibration.score_family_, scores, self.calibration.threshold_).sum())
        return self.observe_statistic(query_statistic(self.statistic, scores, set_size))

    def observe_statistic(self, value: float) -> MonitorUpdate:
        """Update with one query's raw statistic (for a stream computed elsewhere)."""
        value = check_statistics([value])[0]
        with self._lock:
            p = self._test.update(strangeness(self.statistic, value))
            self.stream.append(value)
            index = self._test.n_stream - 1
            return MonitorUpdate(index, value, p, _exp(self._test.log_path[-1]), self.alarm)

    def observe_label(self, covered: bool | None = None, *, nonconformity: float | None = None) -> ConformalMonitor:
        """Record a label for a served query.

        Parameters
        ----------
        covered : bool, optional
            Whether the returned set held a gold chunk (user feedback, a judge).
        nonconformity : float, optional
            The gold chunk's nonconformity on the calibration's scale (``+inf`` = not in the
            pool). It gives ``covered`` (finite and ``<= threshold_``) and drives adaptive
            conformal inference: ``err_t`` is whether the set at the current :attr:`aci_alpha`
            missed. A gold chunk outside the pool is a miss even at a ``+inf`` threshold.
            Without it only the coverage confidence sequence moves.
        """
        if nonconformity is not None:
            r = float(nonconformity)
            if math.isnan(r):
                raise ConformalError("A NaN nonconformity label; pass the gold chunk's score or +inf for a miss.")
            hit = not aci_miss(r, self.calibration.threshold_)
            if covered is not None and bool(covered) != hit:
                raise ConformalError(
                    f"covered={covered} contradicts nonconformity {r} against the threshold "
                    f"{self.calibration.threshold_}."
                )
            covered = hit
        if covered is None:
            raise ConformalError("Pass covered=True/False or the gold's nonconformity.")
        with self._lock:
            self._add_label(bool(covered), None if nonconformity is None else float(nonconformity))
        return self

    def _add_label(self, covered: bool, nonconformity: float | None) -> None:
        if nonconformity is not None:
            miss = aci_miss(nonconformity, aci_threshold(self.calibration.scores_, self.aci_alpha))
            self.aci_alpha = aci_next_alpha(self.aci_alpha, self.calibration.alpha_, self.aci_gamma, miss)
            self.aci_errors.append(miss)
            covered = covered and math.isfinite(nonconformity)  # older files: covered at a +inf threshold
        self.labels.append((covered, nonconformity))

    @property
    def aci_miss_rate(self) -> float:
        """Share of the labels with a nonconformity whose ACI set missed (``nan`` before any).

        The set at ``alpha_t <= 0`` keeps every candidate, but a gold chunk outside the pool is
        still a miss, so this is the served sets' real miss rate; when it stays above ``alpha``
        the pool itself is too small.
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
        m = self._test.log_path[-1] if self._test.log_path else 0.0
        alarm = f"ALARM at query {self.alarm_at}" if self.alarm else "no alarm"
        return (
            f"{self.statistic} monitor: {self.n_stream} queries, martingale {_exp(m):.3g} "
            f"(alarm at {self.threshold:g}), {alarm}, {len(self.labels)} labels"
        )

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state with the schema version and a SHA-256 checksum."""
        with self._lock:
            payload = {
                "kind": _KIND,
                "schema_version": MONITOR_SCHEMA_VERSION,
                "statistic": self.statistic,
                "delta": self.delta,
                "coverage_delta": self.coverage_delta,
                "jump": self.jump,
                "aci_gamma": self.aci_gamma,
                "seed": self.seed,
                "calibration": dict(self.identity),
                "reference": [_enc(v) for v in self.reference],
                "stream": [_enc(v) for v in self.stream],
                "p_values": list(self._test.p_values),
                "log_martingale": list(self._test.log_path),
                "alarm_at": self.alarm_at,
                "labels": [{"covered": c, "nonconformity": None if r is None else _enc(r)} for c, r in self.labels],
                "aci_alpha": self.aci_alpha,
                "created_at": self.created_at,
            }
        return with_checksum(payload)

    @classmethod
    def from_dict(cls, data: dict[str, Any], calibration: RetrievalCalibration | Any) -> ConformalMonitor:
        """Verify a dict from :meth:`to_dict` for ``calibration``, replay it and check every stored value.

        Raises
        ------
        CalibrationIntegrityError
            Wrong kind, version, checksum or field; or a stored p-value, martingale value,
            alarm or ACI level that the replay does not reproduce.
        FingerprintMismatchError, CalibrationError
            The file belongs to another calibration.
        """
        verify(data, _KIND, MONITOR_SCHEMA_VERSION)
        check_fields(MonitorFile, data, "drift monitor")
        mon = cls(
            calibration,
            reference=[_dec(v) for v in data["reference"]],
            statistic=data["statistic"],
            delta=data["delta"],
            jump=data["jump"],
            seed=data["seed"],
            coverage_delta=data["coverage_delta"],
            aci_gamma=data["aci_gamma"],
        )
        stored = dict(data["calibration"])
        if stored != mon.identity:
            mon.identity = stored
            mon._verified = []
            mon.check_calibration(calibration)  # raises, naming what differs
        mon.created_at = str(data["created_at"])
        for v in data["stream"]:
            mon.observe_statistic(_dec(v))
        for label in data["labels"]:
            r = label.get("nonconformity")
            mon._add_label(bool(label["covered"]), None if r is None else _dec(r))
        _same(mon._test.p_values, data["p_values"], "p-values")
        _same(mon._test.log_path, data["log_martingale"], "martingale values")
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
        return mon

    def save(self, path: str | Path) -> Path:
        """Write the state as JSON (never pickle), atomically."""
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path, calibration: RetrievalCalibration | Any) -> ConformalMonitor:
        """Read, verify and replay a file from :meth:`save`; refuse it for another calibration.

        Examples
        --------
        >>> mon = ConformalMonitor.load("monitor.json", cal)  # doctest: +SKIP
        """
        try:
            return cls.from_dict(read_checked(path, _KIND, MONITOR_SCHEMA_VERSION), calibration)
        except CalibrationIntegrityError as exc:
            raise CalibrationIntegrityError(f"{path}: {exc}") from None


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
