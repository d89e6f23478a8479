"""Calibrate any host that speaks :class:`~.host.RetrievalHost`: the one retrieval calibration flow.

Both adapters' ``calibrate_retriever`` (and LangChain's ``calibrate_compressor``) build their reader and call it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..datasets.examples import CalibrationExample
from .calibration import RetrievalCalibration
from .conformalizer import calibrate_on_host
from .host import RetrievalHost
from .options import RetrievalOptions


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
    return calibrate_on_host(host, examples, opts)
