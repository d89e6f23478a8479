"""Issue 41, item 1, through both frameworks: a grouped query's answer set uses its group's retrieval threshold.

The chunks come from the calibration's own drop-ins (``ConformalNodePostprocessor`` /
``ConformalDocumentCompressor`` with ``ServingOptions(group=...)``, or label-conditional by the chunks'
``collection``), so their metadata is what a ``ConformalRetriever`` writes; the LLMs are fakes. Before the
fix both synthesizers kept only the chunks under the *pooled* retrieval threshold (a hard group's set
under-covers, flagged guaranteed), said an easy group was not guaranteed, and blamed a small group's
keep-all fallback on "max_k / k". Thresholds are computed through the library, never hard-coded.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/answer_sets/engine.py
#   conformal_rag_plugins/langchain/synthesizer.py
#   conformal_rag_plugins/llamaindex/synthesizer.py

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.identity import live_generator
from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer as LCSynth
from conformal_rag_plugins.langchain import ConformalDocumentCompressor
from conformal_rag_plugins.llamaindex import ConformalAnswerSetSynthesizer as LISynth
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.groups import with_chunk_groups, with_groups

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
POOL, ALPHA, ALPHA_RET, M = 30, 0.2, 0.1, 2


def _ranks(tiny: bool = True) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """Gold ranks: ``easy`` on 1..6, ``hard`` on 1..20 (60 questions each), and 3 ``tiny`` questions."""
    rng = np.random.default_rng(7)
    easy, hard = rng.integers(1, 7, 60), rng.integers(1, 21, 60)
    extra = [2.0, 3.0, 4.0] if tiny else []
    scores = tuple(float(r) for r in np.concatenate([easy, hard])) + tuple(extra)
    return scores, ("easy",) * 60 + ("hard",) * 60 + ("tiny",) * len(extra)


def _calibration(*, chunk: bool = False, tiny: bool = True) -> AnswerSetCalibration:
    scores, labels = _ranks(tiny)
    plain = RetrievalCalibration(
        conformal_quantile(scores, ALPHA), ALPHA, "split", "rank", POOL, len(scores), 0, scores, FP
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny group's SmallGroupWarning
        grouped = with_chunk_groups(plain, labels, "collection") if chunk else with_groups(plain, labels, "tenant")
    return AnswerSetCalibration.from_stages(
        grouped,
        [-1.0] * len(scores),  # every sampled answer is right: q_gen finite, every cluster kept
        alpha=ALPHA,
        split=SplitOptions(alpha_retrieval=ALPHA_RET),
        n_samples=M,
        model="fake",
        clustering={"method": "exact"},
    )


def _stage_threshold(cal: AnswerSetCalibration, group: str) -> float:
    return float(cal.retrieval_stage().groups_[group]["threshold"])


def _pool_meta(groups: list[str] | None) -> list[dict[str, Any]]:
    return [{} if groups is None else {"collection": groups[i]} for i in range(POOL)]


def _llamaindex(cal: AnswerSetCalibration, options: Any, groups: list[str] | None = None) -> dict[str, Any]:
    from conformal_rag_plugins.retrieval.serving import ServingOptions

    nodes = [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=f"passage {i}", metadata=meta), score=1.0 - i / POOL)
        for i, meta in enumerate(_pool_meta(groups))
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GuaranteeCutWarning of a fallback group
        kept = ConformalNodePostprocessor(calibration=cal, options=options or ServingOptions()).postprocess_nodes(
            nodes, query_str="q"
        )
    llm = MockLLM(max_tokens=2)
    described = LISynth(llm=llm, calibration=cal).sampler.identity()
    checked = replace(cal, generator_=live_generator(described, cal.clustering_))
    return LISynth(llm=llm, calibration=checked).synthesize("Who?", kept).metadata


def _langchain(cal: AnswerSetCalibration, options: Any, groups: list[str] | None = None) -> dict[str, Any]:
    from conformal_rag_plugins.retrieval.serving import ServingOptions

    docs = [
        Document(id=f"n{i}", page_content=f"passage {i}", metadata={**meta, "score": 1.0 - i / POOL})
        for i, meta in enumerate(_pool_meta(groups))
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = ConformalDocumentCompressor(calibration=cal, options=options or ServingOptions()).compress_documents(
            docs, "q"
        )
    llm = FakeListChatModel(responses=["Rollo"])
    described = LCSynth(llm=llm, calibration=cal).sampler.identity()
    checked = replace(cal, generator_=live_generator(described, cal.clustering_))
    return LCSynth(llm=llm, calibration=checked).invoke({"question": "Who?", "context": kept}).to_dict()


FRAMEWORKS = pytest.mark.parametrize("run", [_llamaindex, _langchain], ids=["llamaindex", "langchain"])


def test_the_example_separates_the_groups() -> None:
    """The premise: the pooled threshold at alpha_ret lies between the easy and the hard group's."""
    cal = _calibration()
    pooled = cal.rule().q_ret
    assert _stage_threshold(cal, "easy") < pooled < _stage_threshold(cal, "hard")
    assert math.floor(pooled) < math.floor(_stage_threshold(cal, "hard"))
    assert math.isinf(_stage_threshold(cal, "tiny"))  # too small: keep-all fallback


@FRAMEWORKS
def test_a_hard_group_query_keeps_its_groups_set_guaranteed(run: Any) -> None:
    from conformal_rag_plugins.retrieval.serving import ServingOptions

    cal = _calibration()
    got = run(cal, ServingOptions(group="hard"))
    kept = math.floor(_stage_threshold(cal, "hard"))
    assert got["retrieval_set"] == [f"n{i}" for i in range(kept)]  # before: the pooled floor(q_ret), fewer
    assert len(got["retrieval_set"]) > math.floor(cal.rule().q_ret)
    assert got["llm_calls"] == kept * M
    assert got["guaranteed"] is True and got["reason"] == ""


@FRAMEWORKS
def test_an_easy_group_query_is_guaranteed_on_its_own_smaller_set(run: Any) -> None:
    from conformal_rag_plugins.retrieval.serving import ServingOptions

    cal = _calibration()
    got = run(cal, ServingOptions(group="easy"))
    assert len(got["retrieval_set"]) == math.floor(_stage_threshold(cal, "easy"))
    assert got["guaranteed"] is True, got["reason"]  # before: "below this calibration's retrieval threshold"


@FRAMEWORKS
def test_a_fallback_group_is_not_guaranteed_and_says_why(run: Any) -> None:
    from conformal_rag_plugins.retrieval.serving import ServingOptions

    got = run(_calibration(), ServingOptions(group="tiny"))
    assert got["guaranteed"] is False
    assert "Group 'tiny' has no retrieval threshold of its own" in got["reason"]
    assert "too few calibration questions" in got["reason"]
    assert "fallback threshold (keep-all-small-group)" in got["reason"]
    assert "max_k" not in got["reason"]  # before: "the retriever cut its conformal set (max_k / k)"


@FRAMEWORKS
def test_a_query_without_a_group_keeps_the_pooled_rule(run: Any) -> None:
    from conformal_rag_plugins.retrieval.serving import ServingOptions

    cal = _calibration()
    got = run(cal, ServingOptions())
    assert len(got["retrieval_set"]) == math.floor(cal.rule().q_ret)
    assert got["guaranteed"] is True  # marginal over all groups, as the retriever serves it


@FRAMEWORKS
def test_label_conditional_chunks_each_get_their_own_groups_threshold(run: Any) -> None:
    cal = _calibration(chunk=True, tiny=False)
    groups = ["easy" if i % 2 else "hard" for i in range(POOL)]
    got = run(cal, None, groups)
    want = [f"n{i}" for i in range(POOL) if i + 1 <= _stage_threshold(cal, groups[i])]
    assert got["retrieval_set"] == want
    assert any(i + 1 > cal.rule().q_ret for i in range(POOL) if f"n{i}" in want)  # beyond the pooled threshold
    assert got["guaranteed"] is True, got["reason"]


@FRAMEWORKS
def test_label_conditional_with_a_fallback_group_is_not_guaranteed(run: Any) -> None:
    cal = _calibration(chunk=True)
    groups = ["easy" if i % 2 else "hard" for i in range(POOL)]
    got = run(cal, None, groups)
    assert got["guaranteed"] is False
    assert "Label-conditional retrieval stage" in got["reason"] and "'tiny'" in got["reason"]
