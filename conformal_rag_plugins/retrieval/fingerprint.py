"""What a calibrated threshold is tied to: framework, store, distance, embedding and scale."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..core.errors import CorpusChangedWarning, FingerprintMismatchError

#: The keys of a corpus digest that identify the collection (a stored ``corpus_`` may hold more, e.g. ``ids_filter``).
DIGEST_KEYS = ("size", "ids_sha256")


def corpus_digest(ids: Iterable[str] | None) -> dict[str, Any]:
    """Identity of a collection: its size and a SHA-256 of its sorted chunk ids (``{}`` when unknown).

    >>> corpus_digest(["b", "a"]) == corpus_digest(["a", "b"]), corpus_digest(["a", "b"])["size"]
    (True, 2)
    """
    if ids is None:
        return {}
    keys = sorted(str(i) for i in ids)
    return {"size": len(keys), "ids_sha256": hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()}


def same_corpus(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two corpus digests name the same collection (size and id hash; other keys are ignored).

    >>> same_corpus(corpus_digest(["a"]), corpus_digest(["a"]) | {"ids_filter": {}})
    True
    """
    return all(a.get(k) == b.get(k) for k in DIGEST_KEYS)


def score_range(fingerprint: Fingerprint) -> tuple[float, float] | None:
    """The interval the fingerprint's scale bounds scores to, else ``None``.

    Cosine similarities (incl. LangChain Chroma ``1-distance``) lie in [-1, 1]; LlamaIndex Chroma
    ``exp(-distance)`` in (0, 1].

    >>> score_range(Fingerprint("llamaindex", "SimpleVectorStore", "cosine", "m", 384, "cosine"))
    (-1.0, 1.0)
    >>> score_range(Fingerprint("llamaindex", "BM25Retriever", "bm25", "none", None, "bm25")) is None
    True
    """
    scale = fingerprint.score_scale
    if scale == "cosine" or scale.startswith("cosine(") or (scale == "1-distance" and fingerprint.distance == "cosine"):
        return (-1.0, 1.0)
    if scale == "exp(-distance)":
        return (0.0, 1.0)
    return None


def check_corpus(calibrated: dict[str, Any], current: dict[str, Any], *, stacklevel: int = 3) -> bool:
    """Warn with :class:`CorpusChangedWarning` when both digests are known and differ; return whether they agree."""
    if not calibrated or not current or same_corpus(calibrated, current):
        return True
    warnings.warn(
        f"The host's collection changed since calibration ({calibrated.get('size')} chunks then, "
        f"{current.get('size')} now, or other ids): the candidate pools differ, so the calibrated coverage may "
        "not hold. Re-calibrate on the collection you query.",
        CorpusChangedWarning,
        stacklevel=stacklevel,
    )
    return False


@dataclass(frozen=True)
class Fingerprint:
    """Identity of the scoring pipeline a threshold was calibrated on.

    A threshold transfers only to the same framework call, store class, distance space, embedding
    model and score scale (LlamaIndex's Chroma reports ``exp(-distance)``, LangChain's ``1 - distance``).

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
