"""The Bloom filter of a calibration's chunk ids: exact for held ids, validated when loaded."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from conformal_rag_plugins.core.errors import CalibrationIntegrityError
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.corpus_filter import corpus_record, unknown_ids
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint, check_corpus, corpus_digest
from conformal_rag_plugins.storage.jsonio import with_checksum

IDS = [f"Article_{i // 7}#{i % 7}" for i in range(2000)]


def _calibration() -> RetrievalCalibration:
    fp = Fingerprint("llamaindex", "SimpleVectorStore", "cosine", "m", 4, "cosine")
    cal = RetrievalCalibration(1.9, 0.1, "split", "relative", 5, 20, 0, tuple(i / 10 for i in range(20)), fp)
    return replace(cal, corpus_=corpus_record(IDS))


def test_held_ids_always_pass_and_new_ids_are_caught():
    record = corpus_record(IDS)
    assert unknown_ids(record["ids_filter"], IDS) == []  # no false alarm, ever
    new = [f"v2:{i}" for i in IDS]
    caught = len(unknown_ids(record["ids_filter"], new)) / len(new)
    assert caught > 0.97, caught  # ~1% of new ids pass unnoticed
    assert len(record["ids_filter"]["data"]) < 4000  # ~10 bits an id, base64


def test_filter_is_saved_and_checked_on_load():
    cal = _calibration()
    data = cal.to_dict()
    loaded = RetrievalCalibration.from_dict(data)
    assert loaded.corpus_["ids_filter"] == cal.corpus_["ids_filter"]
    # a file written before the filter existed loads (the filter is optional)
    older = {k: v for k, v in data.items() if k != "checksum"}
    older["corpus"] = {k: v for k, v in older["corpus"].items() if k != "ids_filter"}
    assert RetrievalCalibration.from_dict(with_checksum(older)).corpus_.get("ids_filter") is None
    # a truncated filter, re-checksummed, is refused naming the field
    cut = {k: v for k, v in data.items() if k != "checksum"}
    cut["corpus"] = dict(cut["corpus"], ids_filter=dict(cut["corpus"]["ids_filter"], data="AAAA"))
    with pytest.raises(CalibrationIntegrityError, match="ids_filter"):
        RetrievalCalibration.from_dict(with_checksum(cut))


def test_the_filter_does_not_change_which_collections_are_the_same():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_corpus(corpus_record(IDS), corpus_digest(reversed(IDS)))
    with pytest.warns(UserWarning, match="collection changed"):
        assert not check_corpus(corpus_record(IDS), corpus_digest(IDS[:-1]))
