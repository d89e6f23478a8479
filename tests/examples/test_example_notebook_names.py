"""Public ways for what the example notebooks need: a sample cache by path, chunks grouped by their document."""

from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document

from conformal_rag_plugins import SamplingOptions
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.langchain.question_gen import chunks_from_documents


def test_sampling_options_open_a_sample_cache_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "work" / "samples.sqlite"
    options = SamplingOptions(n_samples=2, cache=path)
    assert isinstance(options.cache, SampleCache)
    assert options.cache.put("k", [Sample("Rollo"), Sample("Rollo")])
    assert path.is_file()
    again = SamplingOptions(n_samples=2, cache=str(path)).cache  # a re-run finds what was stored
    assert [s.text for s in again.get("k", n=2)] == ["Rollo", "Rollo"]


def test_sampling_options_keep_a_cache_object_or_none() -> None:
    cache = SampleCache(":memory:")
    assert SamplingOptions(cache=cache).cache is cache
    assert SamplingOptions().cache is None


def test_langchain_question_chunks_belong_to_their_document_id() -> None:
    """Chunks of ``local.recursive_splitter`` name their document in ``metadata["doc_id"]``: questions are
    sampled evenly across documents, not across chunks."""
    docs = [
        Document("Rollo led the Normans.", id="normans.txt::chunk0", metadata={"doc_id": "normans.txt"}),
        Document("They settled in Normandy.", id="normans.txt::chunk1", metadata={"doc_id": "normans.txt"}),
        Document("Old style.", id="c", metadata={"parent_id": "p", "source": "s.txt"}),
        Document("Only a file.", id="d", metadata={"source": "s.txt"}),
    ]
    assert [c.parent_id for c in chunks_from_documents(docs)] == ["normans.txt", "normans.txt", "p", "s.txt"]
