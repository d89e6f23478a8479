"""The fitted retrieval calibration: immutable, JSON with a schema version and checksum."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import CalibrationIntegrityError
from .fingerprint import Fingerprint
from .jsonio import decode_float as _dec
from .jsonio import encode_float as _enc
from .jsonio import read_checked, verify, with_checksum

__all__ = ["SCHEMA_VERSION", "RetrievalCalibration"]

SCHEMA_VERSION = 1
_KIND = "conformal_rag_plugins.retrieval_calibration"


@dataclass(frozen=True)
class RetrievalCalibration:
    """A calibrated retrieval threshold (scikit-learn style: fitted attributes end in ``_``).

    Build it with :class:`~conformal_rag_plugins.calibration.RetrievalConformalizer` or a
    framework's ``calibrate_retriever``; save and load it with :meth:`save` / :meth:`load`.

    Attributes
    ----------
    threshold_ : float
        q-hat on the nonconformity scale of ``score_family_`` (``inf`` = keep all).
    alpha_ : float
        Target miscoverage (``1 - confidence_level``); for PAC this is epsilon.
    method_ : {"split", "pac"}
    delta_ : float or None
        PAC confidence parameter.
    score_family_ : {"similarity", "rank", "relative"}
    pool_size_ : int
        Candidates requested from the host per query, at calibration and query time.
    n_calibration_ : int
    n_misses_ : int
        Calibration questions whose gold chunk was outside the pool (kept, scored +inf).
    scores_ : tuple of float
        The calibration nonconformity scores (for p-values).
    fingerprint_ : Fingerprint
    created_at_ : str
    selection_ : dict
        How ``auto`` or a tuned host chose the family (and host configuration), if they did.
    question_ids_ : tuple of str
        :func:`~conformal_rag_plugins.calibration.examples.question_digest` of each
        calibration question, aligned with ``scores_`` (empty for calibrations built from
        bare observations or saved before this field existed).
    labels_ : dict
        How the calibration labels were made: counts of ``metadata["gold_rule"]``
        (chunk-level gold: ``answer-in-chunk``, ``all-chunks-fallback``, ``unsplit``) and of
        ``metadata["label_rule"]`` (LLM-judge labels), when the examples carry them.
    """

    threshold_: float
    alpha_: float
    method_: str
    score_family_: str
    pool_size_: int
    n_calibration_: int
    n_misses_: int
    scores_: tuple[float, ...]
    fingerprint_: Fingerprint
    delta_: float | None = None
    created_at_: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    selection_: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    labels_: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    question_ids_: tuple[str, ...] = field(default=(), compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.question_ids_ and len(self.question_ids_) != len(self.scores_):
            raise CalibrationIntegrityError(
                f"The calibration records {len(self.question_ids_)} question ids for {len(self.scores_)} scores."
            )

    @property
    def confidence_level_(self) -> float:
        """``1 - alpha_``."""
        return 1.0 - self.alpha_

    @property
    def is_infinite_(self) -> bool:
        """True when every candidate must be returned."""
        return math.isinf(self.threshold_)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict including the schema version and a SHA-256 checksum."""
        payload: dict[str, Any] = {
            "kind": _KIND,
            "schema_version": SCHEMA_VERSION,
            "alpha": self.alpha_,
            "confidence_level": 1.0 - self.alpha_,
            "method": self.method_,
            "epsilon": self.alpha_ if self.method_ == "pac" else None,
            "delta": self.delta_,
            "n": self.n_calibration_,
            "n_misses": self.n_misses_,
            "threshold": _enc(self.threshold_),
            "score_family": self.score_family_,
            "pool_size": self.pool_size_,
            "scores": [_enc(s) for s in self.scores_],
            "fingerprint": self.fingerprint_.to_dict(),
            "created_at": self.created_at_,
            "selection": self.selection_,
            "labels": self.labels_,
            "question_ids": list(self.question_ids_),
        }
        return with_checksum(payload)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalCalibration:
        """Validate kind, schema version and checksum, then rebuild."""
        verify(data, _KIND, SCHEMA_VERSION)
        try:
            return cls(
                threshold_=_dec(data["threshold"]),
                alpha_=float(data["alpha"]),
                method_=str(data["method"]),
                score_family_=str(data["score_family"]),
                pool_size_=int(data["pool_size"]),
                n_calibration_=int(data["n"]),
                n_misses_=int(data["n_misses"]),
                scores_=tuple(_dec(s) for s in data["scores"]),
                fingerprint_=Fingerprint.from_dict(data["fingerprint"]),
                delta_=data.get("delta"),
                created_at_=str(data["created_at"]),
                selection_=dict(data.get("selection") or {}),
                labels_=dict(data.get("labels") or {}),
                question_ids_=tuple(str(q) for q in data.get("question_ids") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationIntegrityError(f"Calibration file is missing or mangles a field: {exc}.") from exc

    def save(self, path: str | Path) -> Path:
        """Write JSON (never pickle) and return the path."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path, *, expected: Fingerprint | None = None) -> RetrievalCalibration:
        """Read a file written by :meth:`save`; optionally check its fingerprint.

        Examples
        --------
        >>> RetrievalCalibration.load("missing.json")  # doctest: +SKIP
        """
        data = read_checked(path, _KIND, SCHEMA_VERSION)
        cal = cls.from_dict(data)
        if expected is not None:
            cal.fingerprint_.check_compatible(expected)
        return cal

    def summary(self) -> str:
        """One line for logs and the CLI."""
        q = "+inf (include everything)" if self.is_infinite_ else f"{self.threshold_:.6g}"
        extra = f", delta={self.delta_}" if self.method_ == "pac" else ""
        return (
            f"{self.method_} alpha={self.alpha_}{extra} family={self.score_family_} n={self.n_calibration_} "
            f"misses={self.n_misses_} pool={self.pool_size_} threshold={q}"
        )
