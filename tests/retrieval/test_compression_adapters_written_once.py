"""What both adapters share is written once (issue 35, adapter line budget).

``ConformalRetriever.evaluate`` is ``report.held_out.HeldOutEvaluation.evaluate`` in both
frameworks; the compressor's cosine, fingerprint rule and pool checks live in ``retrieval.compression``;
the host-``k`` check and one call's options in ``retrieval.serving``; the title room of the LlamaIndex
chunker in ``labelling.chunk_records.chunk_within``; the tuned candidate grid in ``UnitSearch.over``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever

from conformal_rag_plugins.core.errors import (
    CalibrationError,
    ConformalError,
    FingerprintMismatchError,
    GuaranteeCutWarning,
)
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.labelling.chunk_records import chunk_within
from conformal_rag_plugins.langchain import ConformalDocumentCompressor
from conformal_rag_plugins.langchain import ConformalRetriever as LCRetriever
from conformal_rag_plugins.langchain.compressor import compressor_fingerprint
from conformal_rag_plugins.llamaindex import ConformalRetriever as LIRetriever
from conformal_rag_plugins.llamaindex.text_splitting import chunk_entries as li_chunk_entries
from conformal_rag_plugins.llamaindex.text_splitting import title_tokens
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.report.held_out import HeldOutEvaluation
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.compression import (
    COMPRESSOR_SCALE,
    base_pool_size,
    base_retriever_k,
    check_base_count,
    check_compressor_scoring,
    compressed_fingerprint,
    cosine_scores,
)
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.serving import ServingOptions, check_host_k
from conformal_rag_plugins.tuning.fusion_config import FusionConfig
from conformal_rag_plugins.tuning.unit_search import UnitSearch


def test_evaluate_is_written_once() -> None:
    for cls in (LIRetriever, LCRetriever):
        assert issubclass(cls, HeldOutEvaluation)
        assert cls.evaluate is HeldOutEvaluation.evaluate
        assert "_held_out_parts" in vars(cls)


def test_cosine_scores() -> None:
    got = cosine_scores([3.0, 4.0], [[3.0, 4.0], [-3.0, -4.0], [4.0, -3.0], [0.0, 0.0]])
    assert np.allclose(got[:3], [1.0, -1.0, 0.0])
    assert math.isnan(got[3])


def test_compressor_fingerprint_is_the_neutral_rule() -> None:
    base = Fingerprint("langchain", "Chroma", "cosine", "m", 4, "1-distance")
    embeddings = DeterministicFakeEmbedding(size=8)
    fp = compressor_fingerprint(base, embeddings)
    assert fp == compressed_fingerprint(base, ("DeterministicFakeEmbedding", 8))
    assert (fp.retriever, fp.embedding_dim, fp.score_scale) == ("compression:dense", 8, COMPRESSOR_SCALE)
    again = compressed_fingerprint(fp, None)
    assert again.retriever == "compression:dense"  # not stacked twice


# ---------------------------------------------------------------- round two: more checks written once


def _calibration(pool_size: int = 5) -> RetrievalCalibration:
    scores = tuple(i / 100 for i in range(1, 100))
    fp = Fingerprint("langchain", "list", "cosine", "toy", 2, "cosine")
    return RetrievalCalibration(0.9, 0.1, "split", "similarity", pool_size, 99, 0, scores, fp)


class _KRetriever(BaseRetriever):
    k: int = 4

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return []


def test_the_langchain_retriever_refuses_a_host_k_below_the_pool() -> None:
    off = ServingOptions(check_fingerprint=False)
    with pytest.raises(ConformalError, match="returns k=4 candidates but the calibration used a pool of 5"):
        LCRetriever(retriever=_KRetriever(k=4), calibration=_calibration(5), options=off)
    LCRetriever(retriever=_KRetriever(k=5), calibration=_calibration(5), options=off)  # the same pool: fine
    check_host_k(object(), _calibration(5))  # no k of its own: nothing to check


def test_one_calls_options_cap_and_group() -> None:
    opts = ServingOptions(min_k=1, max_k=5, group="a")
    assert opts.for_call(None, None) is opts
    assert opts.for_call(7) is opts  # a looser cap changes nothing
    assert opts.for_call(3, 4) == replace(opts, max_k=3)
    assert opts.for_call(None, group="b") == replace(opts, group="b")
    assert ServingOptions().for_call(None).max_k is None
    with pytest.raises(ConformalError):
        ServingOptions(min_k=3).for_call(2)  # crossed bounds refused, as check_k_bounds does
    lc = LCRetriever.model_construct(calibration=_calibration(), options=ServingOptions(max_k=5), k=2)
    docs = [Document(id=f"d{i}", page_content=str(i)) for i in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuaranteeCutWarning)
        assert len(lc._select(docs, [0.9, 0.8, 0.7, 0.6, 0.5], None, checked=True)) == 2  # the retriever's k=2


def test_the_compressor_pool_checks() -> None:
    assert base_retriever_k(SimpleNamespace(search_kwargs={"k": 50})) == 50
    assert base_retriever_k(SimpleNamespace(search_kwargs={}, vectorstore=object())) == 4
    assert base_retriever_k(SimpleNamespace()) is None
    assert base_pool_size(SimpleNamespace(k=20), None) == 20 and base_pool_size(SimpleNamespace(k=20), 20) == 20
    with pytest.raises(ConformalError, match="Cannot tell how many documents SimpleNamespace returns"):
        base_pool_size(SimpleNamespace(), None)
    with pytest.raises(ConformalError, match=r"search_kwargs=\{'k': 30\}"):
        base_pool_size(SimpleNamespace(k=20), 30)
    check_base_count(2, 2)
    with pytest.raises(ConformalError, match="returned 3 documents, more than pool_size=2"):
        check_base_count(3, 2)


def test_the_compressor_scoring_check() -> None:
    base = Fingerprint("langchain", "Chroma", "cosine", "m", 4, "1-distance")
    scored = compressed_fingerprint(base, ("DeterministicFakeEmbedding", 8))
    check_compressor_scoring(base, None)
    check_compressor_scoring(scored, ("DeterministicFakeEmbedding", 8))
    with pytest.raises(FingerprintMismatchError, match="scored documents with embeddings"):
        check_compressor_scoring(scored, None)
    with pytest.raises(FingerprintMismatchError):
        check_compressor_scoring(scored, ("other", 8))
    cal = replace(_calibration(), fingerprint_=scored)
    with pytest.raises(FingerprintMismatchError, match="scored documents with embeddings"):
        ConformalDocumentCompressor(calibration=cal)
    ConformalDocumentCompressor(calibration=cal, embeddings=DeterministicFakeEmbedding(size=8))


def test_chunk_within_leaves_room_for_the_title() -> None:
    words = len  # one token per character: the window is easy to count

    def split_for(room: int):
        return lambda text: [text[i : i + room] for i in range(0, len(text), room)]

    entries = [CorpusEntry("a", "abcdef", title="TT"), CorpusEntry("b", "xy")]
    chunks = chunk_within(entries, split_for, chunk_size=4, count=words, reserve=lambda e: len(e.title or ""))
    assert [(c.id, c.text, c.parent_id) for c in chunks] == [
        ("a::chunk0", "ab", "a"), ("a::chunk1", "cd", "a"), ("a::chunk2", "ef", "a"), ("b", "xy", "b"),
    ]  # fmt: skip
    with pytest.raises(CalibrationError, match="The title of 'a' alone fills the 2-token chunk window"):
        chunk_within(entries[:1], split_for, chunk_size=2, count=words, reserve=lambda e: 2)
    with pytest.raises(CalibrationError, match="Duplicate chunk id 'b'"):
        chunk_within([entries[1], entries[1]], split_for, chunk_size=4, count=words, reserve=lambda e: 0)
    li = li_chunk_entries([CorpusEntry("t", "Rollo led the Normans. " * 40, title="Normans")], chunk_size=64)
    assert len(li) > 1 and all(count_tokens(c.text) + title_tokens("Normans") <= 64 for c in li)


def test_unit_search_over_builds_the_grid() -> None:
    grid = [FusionConfig("zscore", 0.5), FusionConfig("minmax", 0.7)]
    found = UnitSearch.over(grid, (10, 20), "max", True, len)
    assert {c.unit for c in found.candidates} == {"chunk", "parent:max"}
    assert len(found.candidates) == 2 * 2 * 2 and found.how == "max"
    assert len(UnitSearch.over(grid, (10,), "max", False, len).candidates) == 2
