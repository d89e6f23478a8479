"""Calibrate any host that speaks :class:`~.host.RetrievalHost`: the one retrieval calibration flow.

Both adapters' ``calibrate_retriever`` (and LangChain's ``calibrate_compressor``) build their reader and call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample
from .calibration import RetrievalCalibration
from .corpus_filter import corpus_record
from .groups import chunk_group_labels, group_labels
from .host import RetrievalHost
from .options import RetrievalOptions
from .pool_calibration import CandidatePool, calibrate_from_pools, collect_observations, label_counts


def calibrate_host(
    host: RetrievalHost, examples: Sequence[CalibrationExample], options: RetrievalOptions | None = None
) -> RetrievalCalibration:
    """Calibrate the conformal retrieval threshold by querying ``host`` once per example.

    Parameters
    ----------
    host : RetrievalHost
        An adapter's reader (``LlamaIndexHost``, ``LangChainHost``) or any object with the protocol.
    examples : sequence of CalibrationExample
        Labelled questions; ``host.prepare_gold`` puts their gold on the host's unit and checks it.
    options : RetrievalOptions, optional
        Level, score family (default ``"relative"``), method, groups, control, progress bar.

    Returns
    -------
    RetrievalCalibration
        With the host's fingerprint, ``pool_size_ = host.pool_size`` and the corpus record of ``host.all_ids()``.

    Raises
    ------
    ConformalError
        Both ``group_by`` and ``chunk_group_key``; a gold id the store does not hold.

    Examples
    --------
    >>> cal = calibrate_host(LlamaIndexHost(index), examples, RetrievalOptions(0.9))  # doctest: +SKIP
    """
    opts = options if options is not None else RetrievalOptions()
    key = opts.chunk_group_key
    if key is not None and opts.group_by is not None:
        raise ConformalError("Give group_by (a group of the query) or chunk_group_key (of the chunk), not both.")
    examples = list(examples)
    groups = group_labels(examples, opts.group_by) if opts.group_by is not None else None
    examples = host.prepare_gold(examples)
    seen: dict[str, Any] = {}  # chunk id -> metadata[chunk_group_key], from every pool fetched

    def fetch(question: str) -> CandidatePool:
        pool = host.fetch(question, key)
        for ident, value in zip(pool.ids, pool.groups or (), strict=False):
            if ident is not None and value is not None:
                seen[ident] = value
        return pool

    observations = collect_observations(examples, fetch, progress=opts.progress)
    if key is not None:
        groups = chunk_group_labels(examples, key, seen)
    cal = calibrate_from_pools(
        observations,
        fingerprint=host.fingerprint(),
        pool_size=host.pool_size,
        options=opts,
        labels=label_counts(examples),
        group_labels=groups,
    )
    return replace(cal, corpus_=corpus_record(host.all_ids()))
