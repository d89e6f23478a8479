"""What a calibrated threshold is tied to: framework, store, distance, embedding and scale."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ..core.errors import FingerprintMismatchError

__all__ = ["Fingerprint"]


@dataclass(frozen=True)
class Fingerprint:
    """Identity of the scoring pipeline a threshold was calibrated on.

    A threshold transfers only to the same framework call, store class,
    distance space, embedding model and score scale (for example LlamaIndex's
    Chroma store reports ``exp(-distance)`` and LangChain's ``1 - distance``).

    Examples
    --------
    >>> a = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
    >>> a.check_compatible(a)
    """

    framework: str
    store: str
    distance: str
    embedding_model: str
    embedding_dim: int | None
    score_scale: str
    retriever: str = "dense"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def check_compatible(self, other: Fingerprint) -> None:
        """Raise :class:`FingerprintMismatchError` naming every field that differs."""
        diffs = [
            f"{f.name}: calibrated with {getattr(self, f.name)!r}, used with {getattr(other, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]
        if diffs:
            raise FingerprintMismatchError(
                "This calibration was made for another retrieval pipeline, so its threshold does "
                "not transfer:\n  - " + "\n  - ".join(diffs) + "\nRe-run calibrate_retriever on the "
                "retriever you query with."
            )
