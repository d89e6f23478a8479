"""The library's tuned hybrid chooses the pool size and the unit (chunk or parent) by context tokens.

``calibrate_hybrid_retriever`` of both frameworks on the real offline stack (MiniLM, Chroma,
BM25): a forced small pool that misses more than alpha of the questions makes a larger pool
win, recorded in the fingerprint and ``selection_``; with ``parents=`` chunk and parent level
compete by mean context tokens (not by the number of units); the chosen host's calibration
works through ``ConformalRetriever`` and held-out coverage stays in the split-conformal band,
while keeping the base pool (the rule before pool tuning) falls below it.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/llamaindex/tuned_units.py

from __future__ import annotations

import warnings

import numpy as np
import pytest

from conformal_rag_plugins.core.coverage_band import split_conformal_band
from conformal_rag_plugins.core.errors import ConformalError, PoolMissWarning
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.tuning.candidates import CandidateSearch
from conformal_rag_plugins.tuning.options import TuningOptions

pytestmark = pytest.mark.integration

ALPHA = 0.1
SMALL = 2
SEED = 20261124
N_CAL = 300


def _held_out(squad_questions, dropin_split):
    return [squad_questions[i] for i in dropin_split.held_out]


def _band_low(n_calibration: int, n_test: int) -> float:
    return split_conformal_band(n_calibration, n_test, ALPHA, level=0.99)[0]


def _check_selection(cal, base: int) -> int:
    sel = cal.selection_
    pool = sel["pool_size"]
    assert pool > base and pool == cal.pool_size_ and sel["pool_sizes"] == [base, 2 * base, 4 * base]
    assert sel["tuning_objective"] == "tokens" and sel["unit"] == "chunk" and sel["candidate"].endswith(f"@{pool}")
    assert all(name.endswith(f"@{2 * base}") or name.endswith(f"@{4 * base}") or "@" not in name
               for name in sel["infeasible"])  # fmt: skip
    assert any("@" in name for name in sel["grid"])  # the base pool missed more than alpha/2: larger pools competed
    best = min(sel["mean_tokens"], key=sel["mean_tokens"].get)
    assert best == f"{sel['candidate']}|{sel['chosen']}"
    return pool


@pytest.fixture(scope="module")
def li_nodes(li_index, squad_entries, chroma_memory_client):
    from conformal_rag_plugins.commands.hosts import corpus_key
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index

    name = f"crp-llamaindex-{corpus_key(squad_entries)}"
    return build_chroma_index(squad_entries, client=chroma_memory_client, collection_name=name)


def test_llamaindex_small_pool_tunes_a_larger_pool(li_nodes, dropin_examples, squad_questions, dropin_split) -> None:
    from conformal_rag_plugins.core.errors import FingerprintMismatchError
    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever
    from conformal_rag_plugins.llamaindex.hybrid_tuning import calibrate_hybrid_retriever, hybrid_from_calibration
    from conformal_rag_plugins.local.llamaindex_stack import build_hybrid_retriever

    index, nodes = li_nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        host, cal = calibrate_hybrid_retriever(
            index,
            nodes,
            dropin_examples,
            pool_size=SMALL,
            options=RetrievalOptions(progress=False),
        )
    pool = _check_selection(cal, SMALL)
    assert any("@" not in name for name in cal.selection_["infeasible"])  # the base pool misses more than alpha
    assert host.similarity_top_k == pool and f"top_k={pool}," in cal.fingerprint_.retriever

    rebuilt = hybrid_from_calibration(index, nodes, cal)
    assert rebuilt.similarity_top_k == pool
    retriever = ConformalRetriever(retriever=rebuilt, calibration=cal)
    held = _held_out(squad_questions, dropin_split)
    covered = [bool({n.node.node_id for n in retriever.retrieve(ex.question)} & set(ex.gold_ids)) for ex in held]
    low = _band_low(cal.n_calibration_, len(held))
    assert np.mean(covered) >= low

    config = cal.selection_
    other = build_hybrid_retriever(
        index, nodes, pool_size=4 * SMALL if pool != 4 * SMALL else 2 * SMALL,
        dense_weight=config["dense_weight"], mode=config["fusion_method"],
    )  # fmt: skip
    with pytest.raises((FingerprintMismatchError, ConformalError)):
        ConformalRetriever(retriever=other, calibration=cal)

    # negative control: keeping the base pool (the rule before pool tuning) misses the band
    base = build_hybrid_retriever(index, nodes, pool_size=SMALL, dense_weight=0.7, mode="zscore")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        base_cal = calibrate_retriever(
            base,
            dropin_examples,
            confidence_level=1 - ALPHA,
            options=RetrievalOptions(progress=False),
        )
    control = ConformalRetriever(retriever=base, calibration=base_cal)
    missed = [bool({n.node.node_id for n in control.retrieve(ex.question)} & set(ex.gold_ids)) for ex in held]
    assert np.mean(missed) < _band_low(base_cal.n_calibration_, len(held))


def test_langchain_small_pool_tunes_a_larger_pool(lc_store, squad_entries, dropin_examples, squad_questions,
                                                  dropin_split) -> None:  # fmt: skip
    from conformal_rag_plugins.langchain import ConformalRetriever
    from conformal_rag_plugins.langchain.fusion import ScoredFusionRetriever
    from conformal_rag_plugins.langchain.host import doc_id
    from conformal_rag_plugins.langchain.hybrid_tuning import calibrate_hybrid_retriever, hybrid_from_calibration

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        host, cal = calibrate_hybrid_retriever(
            lc_store,
            squad_entries,
            dropin_examples,
            pool_size=SMALL,
            options=RetrievalOptions(progress=False),
        )  # fmt: skip
    pool = _check_selection(cal, SMALL)
    assert host.k == pool and f"k={pool})" in cal.fingerprint_.retriever

    rebuilt = hybrid_from_calibration(lc_store, squad_entries, cal)
    assert rebuilt.k == pool
    retriever = ConformalRetriever(retriever=rebuilt, calibration=cal)
    held = _held_out(squad_questions, dropin_split)
    covered = [bool({doc_id(d) for d in retriever.invoke(ex.question)} & set(ex.gold_ids)) for ex in held]
    assert np.mean(covered) >= _band_low(cal.n_calibration_, len(held))
    other = ScoredFusionRetriever(vectorstore=lc_store, bm25=rebuilt.bm25, k=SMALL, weight=rebuilt.weight,
                                  method=rebuilt.method)  # fmt: skip
    with pytest.raises(ConformalError):
        ConformalRetriever(retriever=other, calibration=cal)


@pytest.fixture(scope="module")
def long_split(long_documents):
    perm = np.random.default_rng(SEED).permutation(len(long_documents[1]))
    return [long_documents[1][i] for i in perm[:N_CAL]], [long_documents[1][i] for i in perm[N_CAL:]]


@pytest.fixture(scope="module")
def flat(long_documents, chroma_memory_client):
    from conformal_rag_plugins.local.llamaindex_parents import build_parent_stack

    return build_parent_stack(long_documents[0], layout="flat", client=chroma_memory_client)


def test_llamaindex_parents_compete_by_tokens_not_units(flat, long_split) -> None:
    """Parents make smaller sets (fewer units) but the LLM reads fewer tokens from chunks: tokens decide."""
    from conformal_rag_plugins.llamaindex import ConformalRetriever
    from conformal_rag_plugins.llamaindex.hybrid_tuning import calibrate_hybrid_retriever, hybrid_from_calibration
    from conformal_rag_plugins.local.tokens import count_tokens

    docstore = flat.storage_context.docstore
    host, cal = calibrate_hybrid_retriever(
        flat.index,
        flat.chunks,
        long_split[0],
        parents=docstore,
        options=RetrievalOptions(progress=False),
    )
    sel = cal.selection_
    assert sel["units"] == ["chunk", "parent:max"] and sel["tuning_objective"] == "tokens"
    tokens, sizes = sel["mean_tokens"], sel["grid"]
    assert set(tokens) == set(sizes) and any(k.startswith("parent:max/") for k in tokens)
    chosen = f"{sel['candidate']}|{sel['chosen']}"
    assert tokens[chosen] == min(tokens.values())
    fewest_units = min(sizes, key=sizes.get)
    assert fewest_units.startswith("parent:max/") and tokens[fewest_units] > 3 * tokens[chosen]
    assert sel["unit"] == "chunk" and ">parent:" not in cal.fingerprint_.retriever

    retriever = ConformalRetriever(retriever=hybrid_from_calibration(flat.index, flat.chunks, cal), calibration=cal)
    got = retriever.retrieve(long_split[1][0].question)
    assert 1 <= len(got) <= cal.pool_size_ and sum(count_tokens(n.node.get_content()) for n in got) > 0
    with pytest.raises(ConformalError, match="chunk level"):
        ConformalRetriever(retriever=host, calibration=cal, parents=docstore)


def test_llamaindex_parent_level_chosen_and_used(flat, long_split) -> None:
    """With a 2-chunk pool the chunk level cannot reach 90%; the parent level is chosen and returns parents."""
    from conformal_rag_plugins.llamaindex import ConformalRetriever
    from conformal_rag_plugins.llamaindex.hybrid_tuning import calibrate_hybrid_retriever, hybrid_from_calibration
    from conformal_rag_plugins.llamaindex.parent_retrieval import CHUNKS_METADATA_KEY

    docstore = flat.storage_context.docstore
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        host, cal = calibrate_hybrid_retriever(
            flat.index,
            flat.chunks,
            long_split[0],
            pool_size=SMALL,
            parents=docstore,
            options=RetrievalOptions(progress=False),
            tuning=TuningOptions(pool_sizes=[SMALL]),
        )  # fmt: skip
    sel = cal.selection_
    assert sel["unit"] == "parent:max"
    assert cal.fingerprint_.retriever.endswith(f"top_k={SMALL},subs=dense(default)+bm25)>parent:max")
    assert sel["pool_size"] == cal.pool_size_ == SMALL and sel["infeasible"]
    retriever = ConformalRetriever(
        retriever=hybrid_from_calibration(flat.index, flat.chunks, cal), calibration=cal, parents=docstore
    )
    held = long_split[1]
    results = [retriever.retrieve(ex.question) for ex in held]
    assert all(CHUNKS_METADATA_KEY in n.node.metadata for r in results for n in r)
    covered = [bool({n.node.node_id for n in r} & set(ex.gold_ids)) for r, ex in zip(results, held, strict=True)]
    assert np.mean(covered) >= _band_low(cal.n_calibration_, len(held))
    with pytest.raises(ConformalError, match="parent level"):
        ConformalRetriever(retriever=host, calibration=cal)


def test_langchain_parents_by_tokens_and_the_parent_path(long_documents, long_split, chroma_memory_client) -> None:
    """Parents make fewer units but many more tokens, so chunks are chosen; the parent candidate's
    calibration (same machinery, parent candidates only) works through ``ConformalRetriever`` with parents."""
    from langchain_core.documents import Document

    from conformal_rag_plugins.langchain import ConformalRetriever
    from conformal_rag_plugins.langchain.hybrid_tuning import calibrate_hybrid_retriever, hybrid_from_calibration
    from conformal_rag_plugins.langchain.parent_retrieval import CHUNKS_KEY
    from conformal_rag_plugins.langchain.tuned_units import unit_candidates
    from conformal_rag_plugins.local.langchain_parents import build_parent_document_retriever
    from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig, calibrate_tuned

    pdr = build_parent_document_retriever(long_documents[0], chunk_size=96, client=chroma_memory_client)
    got = pdr.vectorstore.get(include=["documents", "metadatas"])
    chunks = [Document(id=i, page_content=t, metadata=m) for i, t, m in
              zip(got["ids"], got["documents"], got["metadatas"], strict=True)]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        host, cal = calibrate_hybrid_retriever(
            pdr.vectorstore,
            chunks,
            long_split[0],
            pool_size=SMALL,
            parents=pdr.docstore,
            options=RetrievalOptions(progress=False),
            tuning=TuningOptions(pool_sizes=[SMALL]),
        )  # fmt: skip
    sel = cal.selection_
    assert sel["tuning_objective"] == "tokens" and sel["units"] == ["chunk", "parent:max"]
    tokens, sizes = sel["mean_tokens"], sel["grid"]
    chosen = f"{sel['candidate']}|{sel['chosen']}"
    assert tokens[chosen] == min(tokens.values()) and sel["unit"] == "chunk"
    fewest_units = min(sizes, key=sizes.get)
    assert fewest_units.startswith("parent:max/") and tokens[fewest_units] > 3 * tokens[chosen]
    retriever = ConformalRetriever(retriever=hybrid_from_calibration(pdr.vectorstore, chunks, cal), calibration=cal)
    assert retriever.invoke(long_split[1][0].question)
    with pytest.raises(ConformalError, match=r"chunk level|parent"):
        ConformalRetriever(retriever=host, calibration=cal, parents=pdr.docstore)

    found = unit_candidates(pdr.vectorstore, chunks, long_split[0],
                            [FusionConfig("zscore", 0.5)], (SMALL,), parents=pdr.docstore)  # fmt: skip
    parent_cands = [c for c in found.candidates if c.unit == "parent:max"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolMissWarning)
        tuned = calibrate_tuned(
            long_split[0],
            {c: found.fetcher(c) for c in parent_cands},
            found.fingerprint,
            pool_size=SMALL,
            options=RetrievalOptions(progress=False),
            search=CandidateSearch(
                fanout=found.fanout, token_costs=found.token_costs, unit_examples=found.unit_examples
            ),
        )  # fmt: skip
    pcal = tuned.calibration
    assert pcal.selection_["unit"] == "parent:max" and pcal.fingerprint_.retriever.endswith(f"k={SMALL})>parent:max")
    parent_retriever = ConformalRetriever(
        retriever=hybrid_from_calibration(pdr.vectorstore, chunks, pcal), calibration=pcal, parents=pdr.docstore
    )
    held = long_split[1]
    results = [parent_retriever.invoke(ex.question) for ex in held]
    assert all(CHUNKS_KEY in d.metadata for r in results for d in r)
    covered = [bool({d.id for d in r} & set(ex.gold_ids)) for r, ex in zip(results, held, strict=True)]
    assert np.mean(covered) >= _band_low(pcal.n_calibration_, len(held))
    with pytest.raises(ConformalError, match="parent"):
        ConformalRetriever(retriever=found.host(tuned.candidate), calibration=pcal)
