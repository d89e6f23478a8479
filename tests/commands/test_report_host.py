"""The report rebuilds exactly the host a calibration names: every framework and retriever kind round-trips."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformal_rag_plugins.commands.report_host import host_spec, rebuild_host
from conformal_rag_plugins.core.errors import CalibrationError, FingerprintMismatchError
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig

ENTRIES = [
    CorpusEntry("normans", "The Normans gave their name to Normandy, a region in northern France."),
    CorpusEntry("rollo", "Rollo was the Viking leader who founded the duchy of Normandy in 911."),
    CorpusEntry("seine", "The Seine is a river that flows through Paris into the English Channel."),
]


def _cal(fp: Fingerprint, pool: int = 3, **kw) -> RetrievalCalibration:
    return RetrievalCalibration(0.5, 0.2, "split", "relative", pool, 9, 0, (0.5,) * 9, fp, **kw)


@pytest.mark.integration
@pytest.mark.parametrize(
    "spec",
    [
        ("llamaindex", "dense", None),
        ("llamaindex", "bm25", None),
        ("llamaindex", "hybrid", FusionConfig("minmax", 0.3)),
        ("langchain", "dense", None),
        ("langchain", "hybrid", FusionConfig("zscore", 0.7)),
    ],
)
def test_every_host_kind_round_trips_through_its_fingerprint(spec, chroma_memory_client) -> None:
    from conformal_rag_plugins.commands.framework_registry import get_framework
    from conformal_rag_plugins.commands.hosts import build_host

    framework, kind, fusion = spec
    bundle = build_host(framework, kind, ENTRIES, pool_size=3, client=chroma_memory_client, fusion=fusion)
    cal = _cal(get_framework(framework).fingerprint_of(bundle.host))
    assert host_spec(cal) == spec
    assert rebuild_host(cal, spec, ENTRIES, client=chroma_memory_client).kind == kind
    other = _cal(replace(cal.fingerprint_, embedding_model="another-model"))
    with pytest.raises(FingerprintMismatchError, match="another-model"):
        rebuild_host(other, spec, ENTRIES, client=chroma_memory_client)


def test_a_tuned_calibration_names_its_fusion_in_selection() -> None:
    fp = Fingerprint("llamaindex", "QueryFusionRetriever[...]", "cosine", "m", 384, "fusion:x", "fusion(...)")
    cal = _cal(fp, selection_={"rule": "tuned-hybrid", "fusion_method": "minmax", "dense_weight": 0.7})
    assert host_spec(cal) == ("llamaindex", "hybrid", FusionConfig("minmax", 0.7))


def test_an_unknown_host_is_refused_by_name() -> None:
    fp = Fingerprint("langchain", "FAISS", "l2", "m", 384, "FAISS.relevance_score", "dense")
    with pytest.raises(CalibrationError, match=r"cannot rebuild .*FAISS"):
        host_spec(_cal(fp))


def test_other_chunks_are_refused_before_indexing() -> None:
    fp = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "m", 384, "exp(-distance)", "dense(default)")
    cal = _cal(fp, corpus_={"size": 5, "ids_sha256": "0" * 64})
    with pytest.raises(FingerprintMismatchError, match="3 chunks"):
        rebuild_host(cal, ("llamaindex", "dense", None), ENTRIES, client=object())


class _Indexed(Exception):
    """Raised by the stand-in for indexing: the checks before it ran."""


def test_a_calibration_without_a_collection_record_warns_as_monitor_does(monkeypatch) -> None:
    """Issue 41 item 6: ``corpus: null`` went through ``report`` silently (``monitor`` and the drop-ins warn)."""
    import warnings

    from conformal_rag_plugins.commands import hosts
    from conformal_rag_plugins.core.errors import UncheckedCorpusWarning
    from conformal_rag_plugins.retrieval.fingerprint import corpus_digest

    def indexed(*args, **kwargs):
        raise _Indexed

    monkeypatch.setattr(hosts, "build_host", indexed)
    fp = Fingerprint("llamaindex", "ChromaVectorStore", "cosine", "m", 384, "exp(-distance)", "dense(default)")
    spec = ("llamaindex", "dense", None)
    with pytest.warns(UncheckedCorpusWarning, match=r"records no collection \(corpus: null"), pytest.raises(_Indexed):
        rebuild_host(_cal(fp), spec, ENTRIES, client=object())
    recorded = _cal(fp, corpus_=corpus_digest(e.id for e in ENTRIES))
    with warnings.catch_warnings(), pytest.raises(_Indexed):
        warnings.simplefilter("error", UncheckedCorpusWarning)  # the same collection, recorded: silent
        rebuild_host(recorded, spec, ENTRIES, client=object())
