"""Fixtures shared by the integration tests: a fixed calibration/held-out split of the 705 questions
and the calibrations made through each adapter's public ``calibrate_retriever`` (built once)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from conformal_rag_plugins.retrieval.options import RetrievalOptions

DROPIN_SEED = 20261122
N_DROPIN_CALIBRATION = 300
CONFIDENCE = 0.9


@dataclass(frozen=True)
class DropInSplit:
    """Positions (into ``squad_questions``) of the calibration and held-out questions."""

    calibration: tuple[int, ...]
    held_out: tuple[int, ...]


@pytest.fixture(scope="session")
def dropin_split(squad_questions) -> DropInSplit:
    perm = np.random.default_rng(DROPIN_SEED).permutation(len(squad_questions))
    return DropInSplit(
        tuple(int(i) for i in perm[:N_DROPIN_CALIBRATION]), tuple(int(i) for i in perm[N_DROPIN_CALIBRATION:])
    )


@pytest.fixture(scope="session")
def dropin_examples(squad_questions, dropin_split):
    """The ~300 calibration examples of the drop-in tests."""
    return [squad_questions[i] for i in dropin_split.calibration]


@pytest.fixture(scope="session")
def li_hybrid_calibration(host_factory, dropin_examples):
    """``llamaindex.calibrate_retriever`` on the default hybrid host (QueryFusionRetriever)."""
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    return calibrate_retriever(
        host_factory("llamaindex", "hybrid").host,
        dropin_examples,
        confidence_level=CONFIDENCE,
        options=RetrievalOptions(progress=False),
    )


@pytest.fixture(scope="session")
def lc_hybrid_calibration(host_factory, dropin_examples):
    """``langchain.calibrate_retriever`` on the default hybrid host (ScoredFusionRetriever)."""
    from conformal_rag_plugins.langchain import calibrate_retriever

    return calibrate_retriever(
        host_factory("langchain", "hybrid").host,
        dropin_examples,
        confidence_level=CONFIDENCE,
        options=RetrievalOptions(progress=False),
    )


@pytest.fixture(scope="session")
def li_index_calibration(li_index, dropin_examples):
    """A calibration made on the ``VectorStoreIndex`` itself (150 questions, pool 50)."""
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    return calibrate_retriever(
        li_index,
        dropin_examples[:150],
        confidence_level=CONFIDENCE,
        options=RetrievalOptions(progress=False),
    )


@pytest.fixture(scope="session")
def lc_store_calibration(lc_store, dropin_examples):
    """A calibration made on the LangChain Chroma vector store (150 questions, pool 50)."""
    from conformal_rag_plugins.langchain import calibrate_retriever

    return calibrate_retriever(
        lc_store,
        dropin_examples[:150],
        confidence_level=CONFIDENCE,
        options=RetrievalOptions(progress=False),
    )
