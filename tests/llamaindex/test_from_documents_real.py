"""``ConformalRetriever.from_documents`` on the real stack (MiniLM, in-memory Chroma), both frameworks.

Twelve bundled long documents and their questions (gold = document ids): the tuned host is
calibrated in one call, serves chunk sets, and a saved calibration rebuilds the same host (same
sets) without calibrating; the same calibration on a changed document set is refused.
"""

from __future__ import annotations

import warnings

import pytest

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.options import RetrievalOptions

pytestmark = pytest.mark.integration


def _data(framework: str):
    from conformal_rag_plugins.local.long_documents import bundled_long_documents

    entries, questions = bundled_long_documents()
    entries = entries[:12]
    ids = {e.id for e in entries}
    examples = [q for q in questions if set(q.gold_ids) <= ids]
    if framework == "llamaindex":
        from llama_index.core import Document

        from conformal_rag_plugins.llamaindex import ConformalRetriever

        docs = [Document(text=e.text, id_=e.id, metadata={"title": e.title}) for e in entries]
    else:
        from langchain_core.documents import Document

        from conformal_rag_plugins.langchain import ConformalRetriever  # type: ignore[assignment]

        docs = [Document(e.text, id=e.id, metadata={"title": e.title}) for e in entries]
    return ConformalRetriever, docs, examples


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_from_documents_tunes_serves_and_reloads(framework, chroma_memory_client, tmp_path) -> None:
    from conformal_rag_plugins.commands.framework_registry import get_framework

    cls, docs, examples = _data(framework)
    assert len(examples) >= 30
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retriever = cls.from_documents(
            docs, examples, confidence_level=0.9, options=RetrievalOptions(progress=False), client=chroma_memory_client
        )
    cal = retriever.calibration
    assert cal.selection_["rule"] == "tuned-hybrid" and cal.confidence_level_ == pytest.approx(0.9)
    assert cal.fingerprint_.framework == framework
    assert cal.labels_["gold_rule"].get("answer-in-chunk", 0) >= len(examples) - 3  # document ids moved onto chunks
    adapter = get_framework(framework)
    ask = adapter.ask(retriever)
    question = examples[0].question
    got = adapter.ids_and_texts(ask(question))
    assert 1 <= len(got) <= cal.pool_size_ and all("::chunk" in i for i, _ in got)

    path = cal.save(tmp_path / "calibration.json")
    loaded = RetrievalCalibration.load(path)
    again = cls.from_documents(docs, calibration=loaded, client=chroma_memory_client)
    assert again.calibration.threshold_ == cal.threshold_
    for ex in examples[:5]:
        assert adapter.ids_and_texts(adapter.ask(again)(ex.question)) == adapter.ids_and_texts(ask(ex.question))
    with pytest.raises(CalibrationError, match="another collection"):
        cls.from_documents(docs[1:], calibration=loaded, client=chroma_memory_client)
