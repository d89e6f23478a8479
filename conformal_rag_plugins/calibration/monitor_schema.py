"""The field-by-field schema of a saved :class:`~conformal_rag_plugins.calibration.ConformalMonitor`.

Examples
--------
>>> check_fields(MonitorFile, {"kind": "x"}, "drift monitor")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.CalibrationIntegrityError: The drift monitor has invalid fields: ...
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..core.martingale import STATISTICS
from .schema import Checksum, FingerprintFile, Finite, Level, Text, _Strict, check_fields

__all__ = ["CalibrationIdentityFile", "LabelFile", "MonitorFile", "check_fields"]

Stat = Finite | Literal["+inf", "inf", "-inf"]


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


class MonitorFile(_Strict):
    """A saved monitor: its settings, the calibration's identity, the stream and the labels."""

    kind: Literal["conformal_rag_plugins.conformal_monitor"]
    schema_version: Literal[1]
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
    checksum: Checksum | None = None

    @model_validator(mode="after")
    def _agree(self) -> MonitorFile:
        n = len(self.stream)
        if len(self.p_values) != n or len(self.log_martingale) != n:
            raise ValueError(
                f"{n} stream statistics but {len(self.p_values)} p-values and {len(self.log_martingale)} martingale "
                "values"
            )
        if self.alarm_at is not None and self.alarm_at >= n:
            raise ValueError(f"alarm_at = {self.alarm_at} is past the {n} stream queries")
        return self
