"""Bad input through both adapters on the real stack: clear, typed errors instead of silent wrong sets."""

from __future__ import annotations

import pytest

from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, FingerprintMismatchError
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.langchain import ConformalRetriever as LCRetriever
from conformal_rag_plugins.langchain import calibrate_retriever as lc_calibrate
from conformal_rag_plugins.llamaindex import ConformalRetriever as LIRetriever
from conformal_rag_plugins.llamaindex import calibrate_retriever as li_calibrate
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import ServingOptions

pytestmark = pytest.mark.integration

BAD_ID = "Normans#9999-typo"


@pytest.fixture(scope="module")
def li_host(host_factory):
    return host_factory("llamaindex", "hybrid").host


@pytest.fixture(scope="module")
def lc_host(host_factory):
    return host_factory("langchain", "hybrid").host


def _with_bad_id(examples):
    return [*examples[:20], CalibrationExample("Where is Normandy?", gold_ids=(BAD_ID,))]


def test_unknown_gold_id_is_named(li_host, lc_host, li_index, lc_store, dropin_examples):
    for calibrate, host in (
        (li_calibrate, li_host),
        (li_calibrate, li_index),
        (lc_calibrate, lc_host),
        (lc_calibrate, lc_store),
    ):
        with pytest.raises(CalibrationError, match=BAD_ID) as info:
            calibrate(host, _with_bad_id(dropin_examples), options=RetrievalOptions(progress=False))
        assert "1 gold id(s) are not in the store, neither as chunk ids nor as document ids" in str(info.value)


def test_no_examples(li_host, lc_host):
    for calibrate, host in ((li_calibrate, li_host), (lc_calibrate, lc_host)):
        with pytest.raises(CalibrationError, match="No calibration examples"):
            calibrate(host, [], options=RetrievalOptions(progress=False))
    unlabeled = [CalibrationExample("Who ruled Normandy?")]
    with pytest.raises(CalibrationError, match="neither gold ids nor gold texts"):
        li_calibrate(li_host, unlabeled, options=RetrievalOptions(progress=False))


def test_too_few_examples_for_the_level(li_host, dropin_examples):
    with pytest.raises(CalibrationError, match="too few"):
        li_calibrate(li_host, dropin_examples[:5], confidence_level=0.9, options=RetrievalOptions(progress=False))


def test_llamaindex_calibration_on_langchain_store(li_index_calibration, lc_store):
    with pytest.raises(FingerprintMismatchError) as info:
        LCRetriever(vectorstore=lc_store, calibration=li_index_calibration)
    text = str(info.value)
    assert "framework: calibrated with 'llamaindex', used with 'langchain'" in text
    assert "score_scale: calibrated with 'exp(-distance)', used with '1-distance'" in text


def test_langchain_calibration_on_llamaindex_index(lc_store_calibration, li_index):
    with pytest.raises(FingerprintMismatchError, match="framework"):
        LIRetriever(index=li_index, calibration=lc_store_calibration)


def test_chroma_and_simple_vector_store_calibrations_do_not_mix(
    li_index, li_index_calibration, squad_entries, squad_questions
):
    """Same embeddings, same passages, other store class: SimpleVectorStore reports raw cosine, not exp(-d)."""
    from llama_index.core import VectorStoreIndex

    from conformal_rag_plugins.llamaindex import MiniLMEmbedding
    from conformal_rag_plugins.local.llamaindex_stack import nodes_from_entries

    entries = squad_entries[:40]
    simple = VectorStoreIndex(nodes_from_entries(entries), embed_model=MiniLMEmbedding())
    assert type(simple.vector_store).__name__ == "SimpleVectorStore"
    with pytest.raises(FingerprintMismatchError) as info:
        LIRetriever(index=simple, calibration=li_index_calibration)
    assert "store: calibrated with 'ChromaVectorStore', used with 'SimpleVectorStore'" in str(info.value)
    LIRetriever(
        index=simple, calibration=li_index_calibration, options=ServingOptions(check_fingerprint=False)
    )  # explicit opt-out works
    # a calibration made on the in-memory index works there and is refused on the Chroma index
    ids = {e.id for e in entries}
    examples = [q for q in squad_questions if set(q.gold_ids) <= ids]
    with pytest.raises(CalibrationError, match=BAD_ID):  # the gold-id check also reads SimpleVectorStore
        li_calibrate(simple, _with_bad_id(examples), options=RetrievalOptions(progress=False))
    own = li_calibrate(simple, examples, confidence_level=0.9, options=RetrievalOptions(progress=False))
    assert own.fingerprint_.score_scale == "cosine" and own.n_calibration_ == len(examples) == 99
    assert LIRetriever(index=simple, calibration=own).retrieve(examples[0].question)
    with pytest.raises(FingerprintMismatchError, match="SimpleVectorStore"):
        LIRetriever(index=li_index, calibration=own)


def test_dense_versus_hybrid_host(li_hybrid_calibration, lc_hybrid_calibration, li_index_calibration, host_factory):
    li_dense = host_factory("llamaindex", "dense").host
    lc_dense = host_factory("langchain", "dense").host
    with pytest.raises(FingerprintMismatchError, match=r"retriever: calibrated with 'fusion\(.*used with 'dense"):
        LIRetriever(retriever=li_dense, calibration=li_hybrid_calibration)
    with pytest.raises(FingerprintMismatchError, match=r"store: calibrated with 'ChromaVectorStore', used with 'Query"):
        LIRetriever(retriever=host_factory("llamaindex", "hybrid").host, calibration=li_index_calibration)
    with pytest.raises(
        FingerprintMismatchError, match=r"store: calibrated with 'ScoredFusionRetriever.*used with 'Chroma'"
    ):
        LCRetriever(vectorstore=lc_dense, calibration=lc_hybrid_calibration)
    # the BM25-only LangChain host is the fusion retriever with weight 0: a different pipeline, refused too
    with pytest.raises(
        FingerprintMismatchError, match=r"weight=0.5,k=50\)', used with 'hybrid\(method=zscore,weight=0,"
    ):
        LCRetriever(retriever=host_factory("langchain", "bm25").host, calibration=lc_hybrid_calibration)


def test_pool_size_mismatch(li_index, li_index_calibration):
    with pytest.raises(ConformalError, match="pool_size"):
        LIRetriever(retriever=li_index.as_retriever(similarity_top_k=10), calibration=li_index_calibration)


def test_crossed_k_bounds(li_host, lc_host, li_hybrid_calibration, lc_hybrid_calibration):
    with pytest.raises(ConformalError, match=r"max_k \(2\) must be >= min_k \(5\)"):
        LIRetriever(retriever=li_host, calibration=li_hybrid_calibration, options=ServingOptions(min_k=5, max_k=2))
    with pytest.raises(ConformalError, match=r"max_k \(2\) must be >= min_k \(5\)"):
        LCRetriever(retriever=lc_host, calibration=lc_hybrid_calibration, options=ServingOptions(min_k=5, max_k=2))
    with pytest.raises(ConformalError, match=r"max_k \(1\) must be >= min_k \(3\)"):
        LCRetriever(retriever=lc_host, calibration=lc_hybrid_calibration, options=ServingOptions(min_k=3), k=1)


def test_exactly_one_host(li_host, li_index, lc_host, lc_store, li_hybrid_calibration, lc_hybrid_calibration):
    with pytest.raises(ConformalError, match="exactly one host"):
        LIRetriever(li_hybrid_calibration)
    with pytest.raises(ConformalError, match="exactly one host"):
        LIRetriever(li_hybrid_calibration, index=li_index, retriever=li_host)
    with pytest.raises(ConformalError, match="exactly one host"):
        LCRetriever(calibration=lc_hybrid_calibration)
    with pytest.raises(ConformalError, match="exactly one host"):
        LCRetriever(calibration=lc_hybrid_calibration, vectorstore=lc_store, retriever=lc_host)


def test_langchain_host_without_scores(lc_store, dropin_examples):
    """A plain ``as_retriever()`` drops the scores; calibration refuses it instead of inventing scores."""
    with pytest.raises(ConformalError, match=r"metadata\['score'\]"):
        lc_calibrate(
            lc_store.as_retriever(search_kwargs={"k": 50}),
            dropin_examples[:20],
            options=RetrievalOptions(progress=False),
        )


def test_calibration_records_the_collection(li_index_calibration, lc_store_calibration, squad_entries):
    for cal in (li_index_calibration, lc_store_calibration):
        assert cal.corpus_["size"] == len(squad_entries)
        assert len(cal.corpus_["ids_sha256"]) == 64


def test_another_collection_with_the_same_model_warns(
    li_index, li_index_calibration, lc_store, lc_store_calibration, squad_entries, chroma_memory_client
):
    """Same framework, store class, distance, model and scale: only the collection digest can tell them apart."""
    import warnings

    from conformal_rag_plugins.core.errors import CorpusChangedWarning
    from conformal_rag_plugins.local.langchain_stack import build_chroma_vectorstore
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index

    subset = squad_entries[: len(squad_entries) // 2]
    other_index, _ = build_chroma_index(subset, client=chroma_memory_client, collection_name="crp-li-subset")
    other_store = build_chroma_vectorstore(subset, client=chroma_memory_client, collection_name="crp-lc-subset")
    with pytest.warns(CorpusChangedWarning, match=f"{len(squad_entries)} chunks then, {len(subset)} now"):
        LIRetriever(index=other_index, calibration=li_index_calibration)
    with pytest.warns(CorpusChangedWarning, match=f"{len(squad_entries)} chunks then, {len(subset)} now"):
        LCRetriever(vectorstore=other_store, calibration=lc_store_calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusChangedWarning)  # the calibrated collection itself: silent
        LIRetriever(index=li_index, calibration=li_index_calibration)
        LCRetriever(vectorstore=lc_store, calibration=lc_store_calibration)


def test_the_collection_digest_survives_save_and_load(li_index_calibration, tmp_path):
    from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

    loaded = RetrievalCalibration.load(li_index_calibration.save(tmp_path / "cal.json"))
    assert loaded.corpus_ == li_index_calibration.corpus_
