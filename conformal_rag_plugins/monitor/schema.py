"""The field-by-field schema of a saved :class:`~conformal_rag_plugins.monitor.monitor.ConformalMonitor`.

Examples
--------
>>> from conformal_rag_plugins.storage.schema import check_fields
>>> check_fields(MonitorFile, {"kind": "x"}, "drift monitor")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.CalibrationIntegrityError: The drift monitor has invalid fields: ...
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..core.martingale import STATISTICS
from ..storage.schema import Checksum, FingerprintFile, Finite, Level, Text, _Strict

Stat = Finite | Literal["+inf", "inf", "-inf"]


def _number(value: float | str) -> float:
    """A stored statistic as a float (``"+inf"``/``"inf"``/``"-inf"`` decoded)."""
    return float(value.replace("+", "")) if isinstance(value, str) else float(value)


class CalibrationIdentityFile(_Strict):
    """Which calibration the monitor belongs to."""

    fingerprint: FingerprintFile
    threshold: Stat
    alpha: Level
    score_family: Text
    checksum: Checksum


class LabelFile(_Strict):
    """One labelled query: whether the deployed set covered, and the gold's nonconformity if known."""

    covered: bool
    nonconformity: Stat | None = None
    #: The query's group (schema 2): its hit is judged against the threshold served for that group.
    group: Text | None = None


class RunFile(_Strict):
    """One run of the drift test (schema 2): the first run, or the run begun by a restart after an alarm."""

    start: Annotated[int, Field(ge=0)]
    delta: Level
    alarm_at: Annotated[int, Field(ge=0)] | None
    started_at: Text
    #: Schema 3: how the run's bag begins; ``"initial"`` is the first run's (and a restart saved before schema 3).
    reference: Literal["initial", "continued", "fresh"] | None = None
    #: Schema 3, a ``"fresh"`` run only: the fresh reference's raw statistics.
    reference_values: Annotated[list[Stat], Field(min_length=1)] | None = None


class MonitorFile(_Strict):
    """A saved monitor: its settings, the calibration's identity, the stream and the labels."""

    kind: Literal["conformal_rag_plugins.conformal_monitor"]
    schema_version: Literal[1, 2, 3]
    statistic: Literal[STATISTICS]  # type: ignore[valid-type]
    delta: Level
    coverage_delta: Level
    jump: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
    aci_gamma: Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
    seed: int
    calibration: CalibrationIdentityFile
    reference: Annotated[list[Stat], Field(min_length=1)]
    stream: list[Stat]
    p_values: list[Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]]
    log_martingale: list[Finite]
    alarm_at: Annotated[int, Field(ge=0)] | None
    labels: list[LabelFile] = Field(default_factory=list)
    aci_alpha: Finite
    created_at: Text
    #: Schema 2: whether the monitored retriever serves per-group thresholds.
    grouped: bool = False
    #: Schema 2: every run, the first and one per restart, in order.
    runs: list[RunFile] | None = None
    #: Written since 2026-11-28: ``statistic`` again, so that an edit of either is refused (``top1`` and
    #: ``gap`` replay alike, both negated). Older files do not have it.
    reference_statistic: Literal[STATISTICS] | None = None  # type: ignore[valid-type]
    #: Schema 3: whose scores the statistic is taken from (before: the served ones).
    score_source: Literal["served", "dense"] | None = None
    #: Written since 2026-11-29: the deployed retrieval calibration itself (its own file's dict, checked by
    #: ``RetrievalCalibration.from_dict``), so the state is one unit: it resumes without the calibration file.
    calibration_record: dict[str, Any] | None = None
    signature: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    checksum: Checksum | None = None

    @model_validator(mode="after")
    def _agree(self) -> MonitorFile:
        n = len(self.stream)
        if self.reference_statistic is not None and self.reference_statistic != self.statistic:
            raise ValueError(
                f"statistic is {self.statistic!r} but the values are {self.reference_statistic!r} statistics"
            )
        self._check_values()
        if (self.schema_version >= 3) != (self.score_source is not None):
            raise ValueError("score_source is a schema 3 field, and every schema 3 file names it")
        if self.schema_version >= 2:
            self._check_runs(n)
        elif self.runs is not None or self.signature is not None:
            raise ValueError("a schema 1 file has no runs and no signature")
        if len(self.p_values) != n or len(self.log_martingale) != n:
            raise ValueError(
                f"{n} stream statistics but {len(self.p_values)} p-values and {len(self.log_martingale)} martingale "
                "values"
            )
        if self.alarm_at is not None and self.alarm_at >= n:
            raise ValueError(f"alarm_at = {self.alarm_at} is past the {n} stream queries")
        return self

    def _check_values(self) -> None:
        """Values a ``statistic`` cannot take: a fractional or negative set size, a negative gap, a top-1 of +inf."""
        fresh = [v for run in self.runs or [] for v in run.reference_values or []]
        values = [_number(v) for v in [*self.reference, *self.stream, *fresh]]
        if self.statistic == "set_size":
            bad = next((v for v in values if not (math.isfinite(v) and v >= 0 and v == int(v))), None)
            what = "a set size is a whole number >= 0"
        elif self.statistic == "gap":
            bad = next((v for v in values if v < 0), None)
            what = "a gap (best minus second score) is >= 0"
        else:
            bad = next((v for v in values if v == math.inf), None)
            what = "a top-1 score is never +inf"
        if bad is not None:
            raise ValueError(f"statistic is {self.statistic!r}, but a stored value is {bad!r}: {what}")

    def _check_runs(self, n: int) -> None:
        if not self.runs:
            raise ValueError("a schema 2 file lists its runs (at least the first)")
        self._check_run_references()
        if self.runs[0].start != 0:
            raise ValueError(f"the first run starts at query {self.runs[0].start}, not 0")
        ends = [r.start for r in self.runs[1:]] + [n]
        for k, (run, end) in enumerate(zip(self.runs, ends, strict=True)):
            if end <= run.start and k + 1 < len(self.runs):
                raise ValueError(f"run {k + 1} starts at query {end}, not after run {k}'s start {run.start}")
            if end < run.start:
                raise ValueError(f"run {k} starts at query {run.start}, past the {n} stream queries")
            if run.alarm_at is not None and not (run.start <= run.alarm_at < end):
                raise ValueError(f"run {k}'s alarm_at = {run.alarm_at} is outside its queries {run.start}..{end - 1}")
        if self.alarm_at != self.runs[-1].alarm_at:
            raise ValueError(f"alarm_at = {self.alarm_at} is not the last run's {self.runs[-1].alarm_at}")

    def _check_run_references(self) -> None:
        """Schema 3 names every run's reference (the first is the initial one; only a fresh one lists values)."""
        runs = self.runs or []
        if self.schema_version < 3:
            if any(r.reference is not None or r.reference_values is not None for r in runs):
                raise ValueError("a schema 2 file names no run reference")
            return
        for k, run in enumerate(runs):
            if run.reference is None:
                raise ValueError(f"run {k} names no reference (schema 3 names every run's)")
            if k == 0 and run.reference != "initial":
                raise ValueError(f"the first run's reference is the initial one, not {run.reference!r}")
            if (run.reference == "fresh") != (run.reference_values is not None):
                raise ValueError(f"run {k}: a fresh reference, and only a fresh one, lists its reference_values")
