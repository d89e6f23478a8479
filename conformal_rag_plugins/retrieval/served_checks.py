"""Query-time checks of a drop-in's pool against its calibration, for drop-ins not given the host.

A score off the calibrated scale (:func:`~.fingerprint.score_range`: another store or retriever) or
an embedding of another dimension (another model) raises ``FingerprintMismatchError``; a chunk id
the calibrated collection did not hold (:mod:`~.corpus_filter`) warns ``CorpusChangedWarning`` once.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence

from ..core.errors import CorpusChangedWarning, FingerprintMismatchError, UncheckedCorpusWarning
from .calibration import RetrievalCalibration
from .corpus_filter import unknown_ids
from .fingerprint import Fingerprint, check_corpus, corpus_digest, score_range

_TOLERANCE = 1e-4  # float32 rounding of normalised embeddings


class ServedPoolCheck:
    """Check each query's pool against a calibration (one per drop-in; ``what`` names it in messages).

    ``corpus_warned=True``: the host was already found on a changed collection (warned once).

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("llamaindex", "SimpleVectorStore", "cosine", "m", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> ServedPoolCheck(cal, "postprocessor")(["a"], [0.7], dims=[2])
    >>> ServedPoolCheck(cal, "postprocessor")(["a"], [3.5])
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.FingerprintMismatchError: The postprocessor received a score of 3.5, ...
    """

    def __init__(self, calibration: RetrievalCalibration, what: str, *, corpus_warned: bool = False) -> None:
        self.fingerprint = calibration.fingerprint_
        self.range = score_range(self.fingerprint)
        self.filter = (calibration.corpus_ or {}).get("ids_filter")
        self.what = what
        self.corpus_warned = corpus_warned

    def __call__(
        self, ids: Sequence[str | None], scores: Iterable[float], *, dims: Iterable[int] = (), stacklevel: int = 4
    ) -> None:
        """Raise on a score off the scale or an embedding of another dimension; warn once on new chunk ids."""
        fp = self.fingerprint
        if self.range is not None:
            lo, hi = self.range
            bad = next((float(s) for s in scores if not lo - _TOLERANCE <= float(s) <= hi + _TOLERANCE), None)
            if bad is not None and not math.isnan(bad):
                raise FingerprintMismatchError(
                    f"The {self.what} received a score of {bad:g}, outside [{lo:g}, {hi:g}] where every score of "
                    f"the calibrated scale {fp.score_scale!r} ({fp.framework} {fp.store}) lies: the pool comes from "
                    "another store or retriever than the one calibrated. Query the calibrated host, or re-calibrate "
                    "on this one."
                )
        if fp.embedding_dim is not None:
            other = next((d for d in dims if d != fp.embedding_dim), None)
            if other is not None:
                raise FingerprintMismatchError(
                    f"The {self.what} received embeddings of dimension {other}, but the calibration was made with "
                    f"{fp.embedding_model!r} ({fp.embedding_dim} dimensions): another embedding model. Query with the "
                    "calibrated model, or re-calibrate with this one."
                )
        if self.filter is not None and not self.corpus_warned:
            new = unknown_ids(self.filter, ids)
            if new:
                self.corpus_warned = True
                warnings.warn(
                    f"The {self.what} received {len(new)} chunk(s) that were not in the collection it was calibrated "
                    f"on (e.g. {new[0]!r}): the host's collection changed since calibration (re-indexed, chunks added "
                    "or another collection), so the calibrated coverage may not hold. Re-calibrate on the collection "
                    "you query.",
                    CorpusChangedWarning,
                    stacklevel=stacklevel,
                )


def check_host(
    calibration: RetrievalCalibration,
    fingerprint: Fingerprint,
    ids: Callable[[], Iterable[str]],
    what: str,
    *,
    stacklevel: int = 2,
) -> ServedPoolCheck:
    """Check a drop-in's host against the calibration; return the check of every query's pool.

    An incompatible ``fingerprint`` raises ``FingerprintMismatchError``. If the calibration recorded its
    collection, a change in the host's ``ids()`` (read only then) warns ``CorpusChangedWarning`` once, at
    ``stacklevel`` (1: the caller's line); the returned per-query check does not warn again. A
    calibration without a collection record warns :class:`UncheckedCorpusWarning` (not checked).
    """
    calibration.fingerprint_.check_compatible(fingerprint)
    same = True
    if calibration.corpus_:
        same = check_corpus(calibration.corpus_, corpus_digest(ids()), stacklevel=stacklevel + 2)
    else:
        warnings.warn(
            f"The {what}'s calibration records no collection (corpus: null: it was made from bare pools or on a "
            "host that could not list its ids, or the field was removed), so the host's collection is not checked: "
            "a changed collection would go unnoticed. Re-calibrate on this host to record it.",
            UncheckedCorpusWarning,
            stacklevel=stacklevel + 1,
        )
    return ServedPoolCheck(calibration, what, corpus_warned=not same)
