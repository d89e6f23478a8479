"""Checks of what a drop-in receives at query time against what its calibration was made on.

A postprocessor or compressor is not given the host, so it checks what the pool itself tells:

* a score outside the interval of the calibrated scale (:func:`~.fingerprint.score_range`: a
  cosine score above 1, an ``exp(-distance)`` score at or below 0): the pool comes from another
  store or retriever, raise :class:`~conformal_rag_plugins.core.errors.FingerprintMismatchError`;
* an embedding (the query's, or a node's) of another dimension than the calibrated model's:
  another embedding model, raise :class:`~conformal_rag_plugins.core.errors.FingerprintMismatchError`;
* a chunk id that the calibrated collection did not hold (its Bloom filter,
  :mod:`~.corpus_filter`): the collection changed, warn with
  :class:`~conformal_rag_plugins.core.errors.CorpusChangedWarning`, once, as a retriever built on
  a changed collection does.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence

from ..core.errors import CorpusChangedWarning, FingerprintMismatchError
from .calibration import RetrievalCalibration
from .corpus_filter import unknown_ids
from .fingerprint import Fingerprint, check_corpus, corpus_digest, score_range

_TOLERANCE = 1e-4  # float32 rounding of normalised embeddings


class ServedPoolCheck:
    """Check each query's pool against a calibration (one per drop-in instance).

    Parameters
    ----------
    calibration : RetrievalCalibration
    what : str
        The drop-in's name, for the messages.
    corpus_warned : bool, default False
        The host was already found on a changed collection (the corpus warning was given).

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
    """Check a drop-in's host against the calibration, and return the check of every query's pool.

    The host's ``fingerprint`` must be compatible (else
    :class:`~conformal_rag_plugins.core.errors.FingerprintMismatchError`); when the calibration
    recorded its collection, the host's ids (``ids()``, read only then) are compared with it and
    a changed collection warns with :class:`~conformal_rag_plugins.core.errors.CorpusChangedWarning`
    at ``stacklevel`` (counted from the caller: 1 is the caller's line), once: the returned
    per-query check then does not warn again.

    Examples
    --------
    >>> fp = Fingerprint("llamaindex", "SimpleVectorStore", "cosine", "m", 2, "cosine")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 3, 9, 0, (0.1,) * 9, fp)
    >>> check_host(cal, fp, lambda: ["a", "b"], "retriever").corpus_warned
    False
    """
    calibration.fingerprint_.check_compatible(fingerprint)
    same = True
    if calibration.corpus_:
        same = check_corpus(calibration.corpus_, corpus_digest(ids()), stacklevel=stacklevel + 2)
    return ServedPoolCheck(calibration, what, corpus_warned=not same)
