"""Exceptions and warnings raised across the library."""

from __future__ import annotations


class ConformalError(ValueError):
    """Base class of every error this library raises on bad input."""


class CalibrationError(ConformalError):
    """The calibration data cannot give the requested guarantee."""


class CalibrationIntegrityError(ConformalError):
    """A saved calibration file is corrupted, tampered with or of an unknown schema."""


class FingerprintMismatchError(ConformalError):
    """A calibration is used with another embedding model, store, distance or scale."""


class GeneratorMismatchError(FingerprintMismatchError):
    """An answer-set calibration is used with another LLM, sampling settings or clustering embedding model.

    The message names every field that differs, with its calibrated and its live value;
    ``fields`` lists the names (``"llm.name"``, ``"sampling.temperature"``, ``"embedding.model"``).
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


class LLMUnavailableError(ConformalError):
    """The LLM answered none of the calls of a run (server down, wrong address, key or model name)."""


class SamplingMismatchError(GeneratorMismatchError, CalibrationError):
    """A synthesizer asked to sample another number of answers than the calibration's M.

    A :class:`GeneratorMismatchError` with ``fields == ("sampling.n_samples",)``; also a
    :class:`CalibrationError`, which was raised before, so ``except CalibrationError`` keeps working.
    """


class InputFileError(CalibrationError):
    """An input file (corpus, qa or questions JSONL, a folder of documents) is missing or malformed.

    The message names the file (``path:line`` for a bad line). A :class:`CalibrationError`, which the
    loaders raised before, so ``except CalibrationError`` keeps working.
    """


class MovedOptionError(ConformalError, TypeError):
    """A keyword that now lives in an option object was passed directly.

    The message names the option and field (``sampling=SamplingOptions(max_concurrency=1)``); also a TypeError.
    """


class NotFittedError(ConformalError, AttributeError):
    """An estimator was used before it was conformalized."""


class InfiniteThresholdWarning(UserWarning):
    """The finite-sample rank exceeds n: the set must include every candidate."""


class GuaranteeCutWarning(UserWarning):
    """A returned set was cut (``max_k`` or pool size), so the guarantee no longer holds."""


class CoverageCeilingWarning(InfiniteThresholdWarning):
    """An answer-set calibration cannot guarantee its target: too many misses for the requested level.

    The message names the generator's coverage ceiling and the retrieval misses.
    """


class CorpusChangedWarning(UserWarning):
    """The host's collection differs from the one the calibration was made on.

    Adding or removing chunks changes the candidate pools, so the calibrated coverage
    may no longer hold; re-calibrate on the collection you query.
    """


class UncheckedCorpusWarning(UserWarning):
    """A drop-in cannot check its host's collection: the calibration records none (``corpus: null``).

    Calibrations made from bare pools, or on a host that cannot list its ids, do not record the
    collection; a changed collection then goes unnoticed. Re-calibrate on the host to record it.
    """


class SmallGroupWarning(UserWarning):
    """A group has too few calibration questions for a finite threshold of its own.

    By default its queries keep every candidate (``+inf``); with ``group_fallback="pooled"``
    they use the pooled threshold, which covers marginally, over all groups, not within that
    group (and their sets are marked not guaranteed).
    """


class PoolMissWarning(UserWarning):
    """More than alpha/2 of the calibration questions have no gold candidate in the pool.

    A miss share near alpha forces a huge threshold (often the whole pool); a larger pool helps.
    """


class UncheckedGeneratorWarning(UserWarning):
    """The LLM, sampling settings or embedding model of an answer-set calibration cannot be compared.

    Files saved before the generator was recorded (and calibrations made without an adapter
    that describes its LLM) carry no record, or the caller gave no live one: the generator
    threshold is then used unchecked. Re-calibrate to get the check.
    """


class UnreachableTargetError(CalibrationError):
    """A pilot showed, before the full calibration, that the generator cannot reach the requested level.

    Raised by the answer-set pilot (``PilotOptions``) when even the one-sided upper confidence bound
    of the generator's coverage ceiling lies below the level the generator stage needs. ``estimate``
    holds the pilot's :class:`~conformal_rag_plugins.answer_sets.pilot.PilotEstimate`.
    """

    def __init__(self, message: str, estimate: object = None) -> None:
        super().__init__(message)
        self.estimate = estimate
