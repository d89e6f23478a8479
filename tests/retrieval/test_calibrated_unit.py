"""retrieval/calibrated_unit.py: the unit a calibration serves, read from its fingerprint, and the level check."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.retrieval.calibrated_unit import calibration_unit, check_unit
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.parent_pools import parent_fingerprint

CHUNK = SimpleNamespace(fingerprint_=Fingerprint("llamaindex", "SimpleVectorStore", "cosine", "m", 4, "cosine"))
PARENT = SimpleNamespace(fingerprint_=parent_fingerprint(CHUNK.fingerprint_, "sum"))


def test_the_unit_is_read_back_from_the_fingerprint():
    assert calibration_unit(CHUNK) == "chunk"
    assert calibration_unit(PARENT) == "parent:sum"
    answer_sets = SimpleNamespace(retrieval_stage=lambda: PARENT)  # an answer-set calibration's retrieval stage
    assert calibration_unit(answer_sets) == "parent:sum"


def test_each_level_refuses_the_other():
    check_unit(CHUNK, False, give_parents="parents=...")
    check_unit(PARENT, True, give_parents="parents=...")
    with pytest.raises(ConformalError, match=r"made at parent level .* pass parents=\.\.\. \(the docstore\)\.$"):
        check_unit(PARENT, False, give_parents="parents=... (the docstore)")
    with pytest.raises(ConformalError, match="made at chunk level"):
        check_unit(CHUNK, True, give_parents="parents=...")
