"""JSON helpers shared by the saved calibration objects: +/-inf encoding and checksums."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from ..core.errors import CalibrationIntegrityError

__all__ = ["decode_float", "encode_float", "read_checked", "verify", "with_checksum"]


def encode_float(x: float) -> float | str:
    """JSON has no infinity: write ``"+inf"`` / ``"-inf"``.

    Examples
    --------
    >>> encode_float(float("inf"))
    '+inf'
    """
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    return x


def decode_float(x: float | str) -> float:
    """Inverse of :func:`encode_float`."""
    if isinstance(x, str):
        if x in ("+inf", "inf"):
            return math.inf
        if x == "-inf":
            return -math.inf
        raise CalibrationIntegrityError(f"Unexpected number {x!r} in calibration file.")
    return float(x)


def _checksum(payload: dict[str, Any]) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def with_checksum(payload: dict[str, Any]) -> dict[str, Any]:
    """Return ``payload`` plus a SHA-256 ``checksum`` over its canonical JSON."""
    return {**payload, "checksum": _checksum(payload)}


def verify(data: Any, kind: str, schema_version: int) -> dict[str, Any]:
    """Check kind, schema version and checksum of a loaded dict."""
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise CalibrationIntegrityError(f"This file is not a {kind.rsplit('.', 1)[-1].replace('_', ' ')}.")
    if data.get("schema_version") != schema_version:
        raise CalibrationIntegrityError(
            f"Calibration schema version {data.get('schema_version')!r} is not supported "
            f"(this library reads version {schema_version}); re-run calibration."
        )
    body = {k: v for k, v in data.items() if k != "checksum"}
    if data.get("checksum") != _checksum(body):
        raise CalibrationIntegrityError(
            "Calibration checksum mismatch: the file was corrupted or edited by hand. "
            "Re-run calibration instead of editing thresholds."
        )
    return data


def read_checked(path: str | Path, kind: str, schema_version: int) -> dict[str, Any]:
    """Read and :func:`verify` a calibration file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CalibrationIntegrityError(f"{path} is not valid JSON ({exc.msg}); it is corrupted.") from exc
    except UnicodeDecodeError as exc:  # binary garbage (or a pickle) is corrupted too, not a codec problem
        raise CalibrationIntegrityError(f"{path} is not UTF-8 JSON; it is corrupted.") from exc
    return verify(data, kind, schema_version)
