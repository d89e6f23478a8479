"""Issue 34: both frameworks' ``calibrate_answer_sets`` run the pilot and stop early on an unreachable target.

A small in-memory host and a fake LLM that never gives the reference answer: the pilot's five
questions (M draws each) are all the LLM calls made before
:class:`~conformal_rag_plugins.UnreachableTargetError`; ``pilot=None`` samples every question as before.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import pytest

from conformal_rag_plugins import PilotOptions, UnreachableTargetError
from conformal_rag_plugins.answer_sets.options import (
    ClusteringOptions,
    RetrievalStageOptions,
    SamplingOptions,
    SplitOptions,
)
from conformal_rag_plugins.datasets.examples import CalibrationExample

N = 40
M = 2
TEXTS = [f"Chunk {i} says the answer is text." for i in range(N)]
EXAMPLES = [CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=("zebra",), id=f"q{i}") for i in range(N)]
# confidence 0.4 with alpha_retrieval 0.1: the generator needs a ceiling of 0.5; 0 of 5 bounds it by 0.45


def _options(pool_size: int | None = None, pilot: Any = PilotOptions()) -> dict[str, Any]:  # noqa: B008
    return {
        "confidence_level": 0.4,
        "sampling": SamplingOptions(n_samples=M, max_concurrency=1, progress=False, pilot=pilot),
        "split": SplitOptions(alpha_retrieval=0.1),
        "clustering": ClusteringOptions("rougeL", 0.7),
        "retrieval": RetrievalStageOptions(pool_size=pool_size),
    }


def _llamaindex(pilot: Any) -> tuple[int, UnreachableTargetError | None]:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode

    from conformal_rag_plugins.llamaindex import calibrate_answer_sets

    class CountingLLM(MockLLM):
        calls: ClassVar[list[int]] = []

        def _generate_text(self, length: int) -> str:
            self.calls.append(1)
            return "text"

    nodes = [TextNode(id_=f"g{i}", text=t) for i, t in enumerate(TEXTS)]
    retriever = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)).as_retriever(similarity_top_k=5)
    llm = CountingLLM(max_tokens=2)
    CountingLLM.calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            calibrate_answer_sets(retriever, llm, EXAMPLES, **_options(pilot=pilot))
        except UnreachableTargetError as error:
            return len(CountingLLM.calls), error
    return len(CountingLLM.calls), None


def _langchain(pilot: Any) -> tuple[int, UnreachableTargetError | None]:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.language_models import FakeListLLM
    from langchain_core.vectorstores import InMemoryVectorStore

    from conformal_rag_plugins.langchain import calibrate_answer_sets

    class ScoredStore(InMemoryVectorStore):
        def _select_relevance_score_fn(self) -> Any:
            return lambda cosine: (1.0 + cosine) / 2.0

    class CountingLLM(FakeListLLM):
        calls: ClassVar[list[int]] = []

        def _call(self, *args: Any, **kwargs: Any) -> str:
            self.calls.append(1)
            return "text"

        async def _acall(self, *args: Any, **kwargs: Any) -> str:
            return self._call(*args, **kwargs)

    store = ScoredStore(DeterministicFakeEmbedding(size=8))
    store.add_documents([Document(id=f"g{i}", page_content=t) for i, t in enumerate(TEXTS)])
    CountingLLM.calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            calibrate_answer_sets(store, CountingLLM(responses=["text"]), EXAMPLES, **_options(5, pilot=pilot))
        except UnreachableTargetError as error:
            return len(CountingLLM.calls), error
    return len(CountingLLM.calls), None


@pytest.mark.parametrize("calibrate", [_llamaindex, _langchain], ids=["llamaindex", "langchain"])
def test_calibrate_answer_sets_stops_after_the_pilots_llm_calls(calibrate) -> None:
    calls, error = calibrate(PilotOptions())
    assert isinstance(error, UnreachableTargetError)
    assert calls == 5 * M  # the five pilot questions, M draws each; not the N * M of the full calibration
    assert error.estimate.n_questions == 5 and error.estimate.n_hits == 0
    assert "upper bound 0.45" in str(error) and "pilot=None" in str(error)


@pytest.mark.parametrize("calibrate", [_llamaindex, _langchain], ids=["llamaindex", "langchain"])
def test_pilot_none_samples_every_question_as_before(calibrate) -> None:
    calls, error = calibrate(None)
    assert error is None and calls == N * M
