"""Which unit a retrieval calibration serves, chunks or parents (small-to-big), and the refusal of the other.

:func:`~.parent_pools.parent_fingerprint` writes the unit into the fingerprint's ``retriever``;
this module reads it back, for the monitor and for a drop-in that checks its host's level.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ConformalError
from .parent_pools import PARENT_MARK


def calibration_unit(calibration: Any) -> str:
    """The unit a calibration's retriever serves, from its fingerprint: ``"chunk"`` or ``"parent:<how>"``.

    >>> from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
    >>> from conformal_rag_plugins.retrieval.parent_pools import parent_fingerprint
    >>> class Cal:
    ...     fingerprint_ = parent_fingerprint(Fingerprint("langchain", "Chroma", "cosine", "m", 4, "1-distance"), "max")
    >>> calibration_unit(Cal())
    'parent:max'
    """
    if hasattr(calibration, "retrieval_stage"):
        calibration = calibration.retrieval_stage()
    retriever = str(calibration.fingerprint_.retriever)
    mark = PARENT_MARK + "parent:"
    return retriever[retriever.rindex(mark) + len(PARENT_MARK) :] if mark in retriever else "chunk"


def check_unit(calibration: Any, at_parent_level: bool, *, give_parents: str) -> None:
    """Refuse a parent-level calibration used at chunk level and the other way round, in plain words.

    ``give_parents``: how this host is given its parents (named when they are missing).
    """
    calibrated_parent = calibration_unit(calibration) != "chunk"
    if calibrated_parent and not at_parent_level:
        raise ConformalError(
            f"This calibration was made at parent level (small-to-big), but no parents were given: pass {give_parents}."
        )
    if at_parent_level and not calibrated_parent:
        raise ConformalError(
            "This calibration was made at chunk level, so its threshold does not hold for parents: re-run "
            "calibrate_retriever(..., parents=...) on this host."
        )
