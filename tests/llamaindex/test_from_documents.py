"""``ConformalRetriever.from_documents`` of both adapters, without the model: inputs, refusals, the one route.

What is refused is refused before anything is embedded (no MiniLM, no Chroma here); the route to the
tuned hybrid is recorded by replacing ``frameworks.calibrate_tuned_chunks``, the function the
command line's ``calibrate`` calls too. The real stack is in ``tests/llamaindex/test_from_documents_real.py``.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/framework.py
#   conformal_rag_plugins/langchain/tuned_host.py
#   conformal_rag_plugins/llamaindex/framework.py
#   conformal_rag_plugins/llamaindex/tuned_host.py

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument

from conformal_rag_plugins import frameworks
from conformal_rag_plugins.commands.framework_registry import get_framework
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, FingerprintMismatchError
from conformal_rag_plugins.datasets.examples import CalibrationExample, CorpusEntry
from conformal_rag_plugins.langchain import ConformalRetriever as LCRetriever
from conformal_rag_plugins.langchain.from_documents import content_id
from conformal_rag_plugins.langchain.from_documents import entries_from_documents as lc_entries
from conformal_rag_plugins.llamaindex import ConformalRetriever as LIRetriever
from conformal_rag_plugins.llamaindex.from_documents import entries_from_documents as li_entries
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import corpus_digest

SAVED = Path(__file__).resolve().parents[1] / "data" / "saved" / "retrieval_v2.json"
# a long document (cut into chunks) and a short one (kept whole)
LONG = " ".join(f"Sentence number {i} tells about the Normans of Normandy and their dukes." for i in range(60))
TEXTS = {"normans": LONG + " Rollo led them in 911.", "short": "Paris is in France."}
EXAMPLE = CalibrationExample("Who led the Normans?", gold_ids=("normans",), answers=("Rollo",))


def _docs(framework: str) -> list:
    if framework == "llamaindex":
        return [LIDocument(text=t, id_=i, metadata={"title": i.title()}) for i, t in TEXTS.items()]
    return [LCDocument(t, id=i, metadata={"title": i.title()}) for i, t in TEXTS.items()]


def _retriever(framework: str) -> type:
    return LIRetriever if framework == "llamaindex" else LCRetriever


def _tuned_calibration(framework: str, **changes: object) -> RetrievalCalibration:
    """A saved calibration dressed as the tuned hybrid of ``framework`` (no threshold is used here)."""
    cal = RetrievalCalibration.load(SAVED)
    fp = replace(cal.fingerprint_, framework=framework)
    sel = {"rule": "tuned-hybrid", "fusion_method": "zscore", "dense_weight": 0.5, "unit": "chunk"}
    return replace(cal, fingerprint_=fp, selection_=sel, **changes)


FRAMEWORKS = ("llamaindex", "langchain")


def test_documents_become_entries_with_their_ids_texts_and_titles() -> None:
    li = li_entries(_docs("llamaindex"))
    lc = lc_entries(_docs("langchain"))
    assert li == lc == [CorpusEntry(i, t, i.title()) for i, t in TEXTS.items()]


def test_a_langchain_document_without_id_gets_one_from_its_text() -> None:
    first, second = lc_entries([LCDocument("Paris is in France.")]), lc_entries([LCDocument("Paris is in France.")])
    assert first[0].id == second[0].id == content_id("Paris is in France.") != content_id("Paris.")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_other_objects_than_the_frameworks_documents_are_refused(framework) -> None:
    with pytest.raises(ConformalError, match=r"documents\[0\] is a str"):
        _retriever(framework).from_documents(["just text"], [EXAMPLE])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_examples_or_calibration_exactly_one(framework) -> None:
    cls, docs = _retriever(framework), _docs(framework)
    with pytest.raises(ConformalError, match="exactly one"):
        cls.from_documents(docs)
    with pytest.raises(ConformalError, match="exactly one"):
        cls.from_documents(docs, [EXAMPLE], calibration=_tuned_calibration(framework))
    with pytest.raises(ConformalError, match="not both"):
        cls.from_documents(docs, [EXAMPLE], client=object(), persist_dir="chroma")
    with pytest.raises(ConformalError, match="at least one document"):
        cls.from_documents([], [EXAMPLE])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_calibration_of_the_other_framework_is_refused(framework) -> None:
    other = "langchain" if framework == "llamaindex" else "llamaindex"
    with pytest.raises(FingerprintMismatchError, match=f"made with {other}, not {framework}"):
        _retriever(framework).from_documents(_docs(framework), calibration=_tuned_calibration(other))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_calibration_of_another_host_is_refused(framework) -> None:
    plain = replace(_tuned_calibration(framework), selection_={})
    with pytest.raises(CalibrationError, match="rebuilds only the chunk-level tuned hybrid"):
        _retriever(framework).from_documents(_docs(framework), calibration=plain)
    parents = _tuned_calibration(framework)
    parents = replace(parents, selection_=parents.selection_ | {"unit": "parent:max"})
    with pytest.raises(CalibrationError, match="rebuilds only the chunk-level tuned hybrid"):
        _retriever(framework).from_documents(_docs(framework), calibration=parents)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_calibration_of_another_collection_is_refused_before_embedding(framework) -> None:
    """Chunked as at calibration the ids differ when a document is missing or the chunking changed."""
    chunks = get_framework(framework).chunk_entries(
        li_entries(_docs("llamaindex")), chunk_size=None, chunk_overlap=None
    )
    cal = _tuned_calibration(framework, corpus_=corpus_digest(c.id for c in chunks))
    cls = _retriever(framework)
    with pytest.raises(CalibrationError, match="another collection"):
        cls.from_documents(_docs(framework)[:1], calibration=cal)
    with pytest.raises(CalibrationError, match="chunk_size=100"):
        cls.from_documents(_docs(framework), calibration=cal, chunk_size=100)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_document_gold_moves_onto_the_chunk_with_the_answer_on_the_command_lines_route(framework, monkeypatch) -> None:
    """from_documents calls the command line's route with chunk-level gold; a typo in a gold id is refused."""
    seen: dict = {}

    class Stop(Exception):
        pass

    def route(adapter, chunks, examples, **kwargs):
        seen.update(adapter=adapter, chunks=list(chunks), examples=list(examples), **kwargs)
        raise Stop

    monkeypatch.setattr(frameworks, "calibrate_tuned_chunks", route)
    monkeypatch.setattr("conformal_rag_plugins.local.chroma.chroma_client", lambda path=None: ("client", path))
    with pytest.raises(Stop):
        _retriever(framework).from_documents(_docs(framework), [EXAMPLE], confidence_level=0.8, persist_dir="here")
    chunk_ids = [c.id for c in seen["chunks"]]
    # the adapter passes its own object (no call back through a name): its tuned-host part, which the
    # registry's FRAMEWORK extends, whose name is the framework
    assert isinstance(get_framework(framework), type(seen["adapter"])) and seen["adapter"].name == framework
    assert "short" in chunk_ids and "normans::chunk0" in chunk_ids
    (ex,) = seen["examples"]
    rollo = [c.id for c in seen["chunks"] if "Rollo" in c.text]
    assert list(ex.gold_ids) == rollo and ex.metadata["gold_rule"] == "answer-in-chunk"
    assert seen["client"] == ("client", "here") and seen["confidence_level"] == 0.8 and seen["pool_size"] == 50
    typo = CalibrationExample("Who?", gold_ids=("normanz",), answers=("Rollo",))
    with pytest.raises(CalibrationError, match="normanz"):
        _retriever(framework).from_documents(_docs(framework), [typo])


def test_the_command_line_takes_the_same_route(monkeypatch) -> None:
    """``conformal-rag calibrate``'s tuned hybrid is ``frameworks.calibrate_tuned_chunks`` (the one route)."""
    from conformal_rag_plugins.commands import calibrate_cmd
    from conformal_rag_plugins.retrieval.options import RetrievalOptions

    calls = []
    monkeypatch.setattr(frameworks, "calibrate_tuned_chunks", lambda *a, **k: calls.append((a, k)) or ("host", "cal"))
    got = calibrate_cmd._tuned("langchain", ["c"], ["e"], "client", level=0.9, pool=50, options=RetrievalOptions(),
                               pool_sizes=[100])  # fmt: skip
    assert got == "cal"
    ((args, kwargs),) = calls
    assert args == (get_framework("langchain"), ["c"], ["e"])
    assert kwargs["client"] == "client" and kwargs["pool_size"] == 50
    assert list(kwargs["tuning"].pool_sizes) == [50, 100]
