"""The options of a retrieval calibration, passed whole: :class:`RetrievalOptions`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.errors import ConformalError
from ..core.validation import DEFAULT_CONFIDENCE_LEVEL
from .groups import GroupBy


@dataclass(frozen=True)
class RetrievalOptions:
    """How a retrieval threshold is calibrated (everything but the host and the questions).

    Attributes
    ----------
    confidence_level : float, default 0.9
        Target probability that a gold chunk is in the returned set (``1 - alpha``).
    score : {"relative", "similarity", "rank", "auto"}, optional
        Nonconformity family; ``None`` is ``"relative"`` for a host, ``"auto"`` for tuned calibrations.
    method : {"split", "pac"}, default "split"
        ``pac`` (``ltt`` with ``control="recall"``) holds with probability ``1 - delta``.
    delta : float, optional
        Required for ``pac``.
    random_state : int, default 0
        Seed of every split the calibration makes.
    strict : bool, default False
        Raise instead of returning a ``+inf`` threshold.
    group_by : str or callable, optional
        Per-group (Mondrian) thresholds: a metadata key or a function of the question (give the
        same to the conformal retriever).
    group_fallback : {"keep_all", "pooled"}, default "keep_all"
        What a group too small for its own threshold, or unseen at calibration, gets.
    chunk_group_key : str, optional
        Label-conditional thresholds: a metadata key of the chunks. Not with ``group_by``.
    control : {"coverage", "recall"}, default "coverage"
        ``recall`` controls ``E[1 - recall]`` instead of the chance of missing every gold chunk.
    progress : bool, default True
    optimisation_fraction : float, default 0.3
        With ``score="auto"``: the seeded share of the questions that chooses the family (not used
        for the threshold).
    miss_bound : float, optional
        The share of questions whose gold the candidate pool may miss, which a set flagged guaranteed
        assumes (``None``: ``alpha / 2``; ``0``: a pool that is the whole corpus, the plain rank
        ``ceil((n+1)(1-alpha))``). In ``[0, alpha)``; recorded in the saved file. Calibration
        misses that contradict it withdraw the flag (see :func:`~conformal_rag_plugins.core.quantile.flagged_rank`).

    Examples
    --------
    >>> opts = RetrievalOptions(score="similarity", group_by="tenant")
    >>> opts.family(), opts.confidence_level, RetrievalOptions().family("auto")
    ('similarity', 0.9, 'auto')
    """

    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL
    score: str | None = None
    method: str = "split"
    delta: float | None = None
    random_state: int = 0
    strict: bool = False
    group_by: GroupBy | None = None
    group_fallback: str = "keep_all"
    chunk_group_key: str | None = None
    control: str = "coverage"
    progress: bool = True
    optimisation_fraction: float = 0.3
    miss_bound: float | None = None

    def family(self, default: str = "relative") -> str:
        """The score family: ``score``, else ``default`` (``"relative"``, or ``"auto"`` when tuning)."""
        return self.score if self.score is not None else default


def with_level(options: RetrievalOptions | None, confidence_level: float | None) -> RetrievalOptions:
    """``options`` (default :class:`RetrievalOptions`) with the ``confidence_level=`` keyword (wins; a conflict raises).

    >>> with_level(None, 0.8).confidence_level
    0.8
    >>> with_level(RetrievalOptions(confidence_level=0.7), None).confidence_level
    0.7
    """
    opts = options if options is not None else RetrievalOptions()
    if confidence_level is None or confidence_level == opts.confidence_level:
        return opts
    if opts.confidence_level != DEFAULT_CONFIDENCE_LEVEL:
        raise ConformalError(
            f"confidence_level={confidence_level} disagrees with options.confidence_level={opts.confidence_level}; "
            "give the level once."
        )
    return replace(opts, confidence_level=confidence_level)
