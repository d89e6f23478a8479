"""JSON helpers of the saved objects: +/-inf encoding, checksums and HMAC-SHA256 signatures.

A checksum catches accidents; anybody can recompute it. With a key (argument or
``$CONFORMAL_RAG_SIGNING_KEY``) files are signed and unsigned or wrongly signed ones refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.errors import CalibrationIntegrityError
from ..runtime.atomic import atomic_write_text
from ..runtime.strict_json import StrictJSONError, loads_finite

SIGNING_KEY_ENV = "CONFORMAL_RAG_SIGNING_KEY"


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


def _canonical(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _checksum(payload: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(payload)).hexdigest()


def resolve_signing_key(key: str | bytes | None) -> bytes | None:
    """The signing key: ``key``, else ``$CONFORMAL_RAG_SIGNING_KEY``, else ``None`` (no signing).

    An empty key or empty variable is refused: a deployment mistake, never a request to sign nothing.

    Examples
    --------
    >>> resolve_signing_key("secret")
    b'secret'
    """
    if key is None:
        key = os.environ.get(SIGNING_KEY_ENV)
        if key is not None and not key:
            raise CalibrationIntegrityError(
                f"${SIGNING_KEY_ENV} is set but empty: set it to the signing key, or unset it to work unsigned."
            )
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if not raw:
        raise CalibrationIntegrityError("The calibration signing key is empty.")
    return raw


def _hmac(payload: dict[str, Any], key: bytes) -> str:
    body = {k: v for k, v in payload.items() if k not in ("checksum", "signature")}
    return hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def sign(payload: dict[str, Any], key: bytes | None) -> dict[str, Any]:
    """``payload`` with an HMAC-SHA256 ``signature`` over everything but checksum and signature (if ``key``)."""
    if key is None:
        return payload
    return {**payload, "signature": _hmac(payload, key)}


def check_signature(data: dict[str, Any], key: bytes | None) -> None:
    """Refuse a file without a valid signature when a key is set (constant-time comparison)."""
    if key is None:
        return
    stored = data.get("signature")
    if not isinstance(stored, str):
        raise CalibrationIntegrityError(
            "The calibration is not signed, but a signing key is set (argument or "
            f"${SIGNING_KEY_ENV}): only signed calibrations are accepted."
        )
    if not hmac.compare_digest(stored, _hmac(data, key)):
        raise CalibrationIntegrityError(
            "The calibration's signature does not match the signing key: it was edited, or signed with another key."
        )


def with_checksum(payload: dict[str, Any]) -> dict[str, Any]:
    """Return ``payload`` plus a SHA-256 ``checksum`` over its canonical JSON."""
    return {**payload, "checksum": _checksum(payload)}


def verify(data: Any, kind: str, schema_version: int | tuple[int, ...]) -> dict[str, Any]:
    """Check kind, schema version (one, or a tuple of readable ones) and checksum of a loaded dict."""
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise CalibrationIntegrityError(f"This file is not a {kind.rsplit('.', 1)[-1].replace('_', ' ')}.")
    readable = schema_version if isinstance(schema_version, tuple) else (schema_version,)
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in readable:
        shown = " or ".join(str(v) for v in readable)
        raise CalibrationIntegrityError(
            f"Calibration schema version {version!r} is not supported "
            f"(this library reads version {shown}); re-run calibration."
        )
    body = {k: v for k, v in data.items() if k != "checksum"}
    if data.get("checksum") != _checksum(body):
        raise CalibrationIntegrityError(
            "Calibration checksum mismatch: the file was corrupted or edited by hand. "
            "Re-run calibration instead of editing thresholds."
        )
    return data


def loads_strict(text: str) -> Any:
    """Parse JSON text, refusing ``NaN``/``Infinity``, ``1e999``, huge integers and nesting too deep to read.

    See :func:`~conformal_rag_plugins.runtime.strict_json.loads_finite`.

    Examples
    --------
    >>> loads_strict('{"alpha": NaN}')
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.CalibrationIntegrityError: the file holds the non-JSON number NaN; ...
    """
    try:
        return loads_finite(text)
    except json.JSONDecodeError as exc:
        raise CalibrationIntegrityError(
            f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); it is corrupted"
        ) from None
    except StrictJSONError as exc:
        raise CalibrationIntegrityError(f"the file {exc}; a saved file never does, it is corrupted") from None


def verify_signed(
    data: Any, kind: str, schema_version: int | tuple[int, ...], signing_key: str | bytes | None
) -> dict[str, Any]:
    """:func:`verify`, then :func:`check_signature` when ``signing_key`` is given (a file's load-time checks)."""
    verify(data, kind, schema_version)
    if signing_key is not None:
        check_signature(data, resolve_signing_key(signing_key))
    return data


def read_json(path: str | Path) -> Any:
    """The strictly parsed (:func:`loads_strict`) JSON of a saved file, refused when it is not UTF-8."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is fine
    except UnicodeDecodeError:  # binary garbage (or a pickle) is corrupted too, not a codec problem
        raise CalibrationIntegrityError("not UTF-8 JSON; it is corrupted") from None
    return loads_strict(text)


def read_checked(path: str | Path, kind: str, schema_version: int | tuple[int, ...]) -> dict[str, Any]:
    """Read and :func:`verify` a calibration file."""
    return verify(read_json(path), kind, schema_version)


@contextmanager
def naming_file(path: str | Path) -> Iterator[None]:
    """Prefix ``path: `` to a :class:`CalibrationIntegrityError` raised inside (what ``load`` methods report).

    Examples
    --------
    >>> with naming_file("cal.json"):
    ...     raise CalibrationIntegrityError("bad checksum")
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.CalibrationIntegrityError: cal.json: bad checksum
    """
    try:
        yield
    except CalibrationIntegrityError as exc:
        raise CalibrationIntegrityError(f"{path}: {exc}") from None


def write_json(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` as JSON, atomically (:func:`~conformal_rag_plugins.runtime.atomic.atomic_write_text`)."""
    return atomic_write_text(path, json.dumps(payload, indent=2, allow_nan=False) + "\n")
