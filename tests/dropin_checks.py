"""Checks the LlamaIndex and LangChain drop-in tests share, written once for both frameworks.

A result view (:class:`LlamaIndexNodes`, :class:`LangChainDocs`) reads one framework's conformal set
(``NodeWithScore`` or ``Document`` lists) the same way, so ``tests/llamaindex/test_retriever.py`` and
``tests/langchain/test_retriever.py`` keep their own test functions (and test ids) while the assertions
that differ only by framework live here. The coverage checks are shared with the LlamaIndex postprocessor
and LangChain compressor tests too.

Examples
--------
>>> from llama_index.core.schema import NodeWithScore, TextNode
>>> LlamaIndexNodes().ids([NodeWithScore(node=TextNode(id_="a", text="x"), score=0.5)])
['a']
>>> round(coverage_sd(k=271, n_cal=300, n_test=405), 4)
0.0228
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import GuaranteeCutWarning
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.quantile import conformal_quantile, conformal_rank
from conformal_rag_plugins.core.splits import RandomSplits
from conformal_rag_plugins.evaluation.retrieval_trials import evaluate_splits
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

#: The miscoverage level of the drop-in calibrations (``confidence_level=0.9`` in ``tests/conftest.py``).
ALPHA = 0.1


class ResultView(Protocol):
    """How a test reads one framework's retriever and the conformal set it returns."""

    def retrieve(self, retriever: Any, question: str) -> list[Any]: ...

    def aretrieve(self, retriever: Any, question: str) -> list[Any]: ...

    def ids(self, items: Sequence[Any]) -> list[str]: ...

    def scores(self, items: Sequence[Any]) -> list[float]: ...

    def metadata(self, items: Sequence[Any]) -> list[dict[str, Any]]: ...


class LlamaIndexNodes:
    """LlamaIndex: ``retrieve``/``aretrieve`` return ``NodeWithScore``; the score is ``n.score``.

    Examples
    --------
    >>> from llama_index.core.schema import NodeWithScore, TextNode
    >>> LlamaIndexNodes().scores([NodeWithScore(node=TextNode(id_="a", text="x"), score=0.5)])
    [0.5]
    """

    def retrieve(self, retriever: Any, question: str) -> list[Any]:
        return retriever.retrieve(question)

    def aretrieve(self, retriever: Any, question: str) -> list[Any]:
        return asyncio.run(retriever.aretrieve(question))

    def ids(self, items: Sequence[Any]) -> list[str]:
        return [n.node.node_id for n in items]

    def scores(self, items: Sequence[Any]) -> list[float]:
        return [n.score for n in items]

    def metadata(self, items: Sequence[Any]) -> list[dict[str, Any]]:
        return [n.node.metadata for n in items]


class LangChainDocs:
    """LangChain: ``invoke``/``ainvoke`` return ``Document``; the score is ``metadata["score"]``.

    Examples
    --------
    >>> from langchain_core.documents import Document
    >>> LangChainDocs().scores([Document(id="a", page_content="x", metadata={"score": 0.5})])
    [0.5]
    """

    def retrieve(self, retriever: Any, question: str) -> list[Any]:
        return retriever.invoke(question)

    def aretrieve(self, retriever: Any, question: str) -> list[Any]:
        return asyncio.run(retriever.ainvoke(question))

    def ids(self, items: Sequence[Any]) -> list[str]:
        return [d.id for d in items]

    def scores(self, items: Sequence[Any]) -> list[float]:
        return [d.metadata["score"] for d in items]

    def metadata(self, items: Sequence[Any]) -> list[dict[str, Any]]:
        return [d.metadata for d in items]


# ---------------------------------------------------------------------------------------------------------------
# Coverage of one held-out split, and of many seeded splits.


def coverage_sd(k: int, n_cal: int, n_test: int) -> float:
    """The sd of one split's held-out coverage over calibration draws: BetaBinomial(n_test, k, n_cal + 1 - k) / n_test.

    Examples
    --------
    >>> round(coverage_sd(k=9, n_cal=10, n_test=10**6), 3)  # Beta(9, 2): sqrt(18 / (121 * 12))
    0.111
    """
    return math.sqrt(k * (n_cal + 1 - k) * (n_cal + 1 + n_test) / (n_test * (n_cal + 1) ** 2 * (n_cal + 2)))


def assert_covers_within_3_sd(covered: Sequence[bool], n_cal: int, alpha: float) -> float:
    """Assert one split's held-out coverage is at least ``1 - alpha`` minus 3 sd (:func:`coverage_sd`); return it.

    Examples
    --------
    >>> assert_covers_within_3_sd([True] * 9 + [False], n_cal=300, alpha=0.1)
    0.9
    """
    sd = coverage_sd(conformal_rank(n_cal, alpha), n_cal, len(covered))
    coverage = float(np.mean(covered))
    assert coverage >= 1 - alpha - 3 * sd, (coverage, sd)
    return coverage


def assert_split_rule_covers(observations: Sequence[PoolObservation], alpha: float) -> None:
    """Assert split conformal over 300 seeded calibration/test splits covers ``>= 1 - alpha - 0.01`` on average.

    Examples
    --------
    >>> obs = [PoolObservation(np.array([1.0, 0.5 - i / 400]), (i % 2,)) for i in range(40)]
    >>> assert_split_rule_covers(obs, 0.1)
    """
    (split,) = [
        r for r in evaluate_splits(observations, alpha, splits=RandomSplits(trials=300, seed=7)) if r.method == "split"
    ]
    assert float(np.mean(split.coverages)) >= 1 - alpha - 0.01, np.mean(split.coverages)


# ---------------------------------------------------------------------------------------------------------------
# The drop-in ``ConformalRetriever`` tests (tests/<framework>/test_retriever.py).


def check_calibration_matches_core(
    cal: RetrievalCalibration, observations: Sequence[PoolObservation], dropin_split: Any
) -> list[float]:
    """The adapter's calibration is the core quantile of the same questions' host scores; return those scores."""
    assert cal.n_calibration_ == 300
    assert (cal.alpha_, cal.method_, cal.score_family_, cal.pool_size_) == (
        pytest.approx(ALPHA),
        "split",
        "relative",
        50,
    )
    scores = [observations[i].score("relative") for i in dropin_split.calibration]
    assert cal.threshold_ == conformal_quantile(scores, ALPHA)
    assert cal.n_misses_ == sum(1 for s in scores if math.isinf(s))
    assert 0 < cal.threshold_ < math.inf
    return scores


def check_conformal_set(view: ResultView, items: Sequence[Any], cal: RetrievalCalibration) -> None:
    """The metadata both adapters put on every item of a guaranteed relative-family set, best first."""
    assert items, "the conformal set is never empty for the relative family (the top chunk has r = 0)"
    scores = view.scores(items)
    assert scores == sorted(scores, reverse=True)
    for score, meta in zip(scores, view.metadata(items), strict=True):
        assert meta["conformal_threshold"] == cal.threshold_
        assert meta["conformal_alpha"] == pytest.approx(ALPHA)
        assert meta["conformal_score_family"] == "relative"
        assert meta["conformal_guaranteed"] is True
        assert meta["conformal_set_size"] == len(items)
        assert meta["conformal_nonconformity"] <= cal.threshold_ + 1e-12
        assert meta["conformal_nonconformity"] == pytest.approx(scores[0] - score)


def check_sync_and_async(
    view: ResultView,
    retriever: Any,
    cal: RetrievalCalibration,
    questions: Sequence[str],
    check_set: Callable[[list[Any], RetrievalCalibration], None],
) -> None:
    """Every question's sync set passes ``check_set(items, cal)``; the async call returns the same ids and scores."""
    for question in questions:
        items = view.retrieve(retriever, question)
        check_set(items, cal)
        again = view.aretrieve(retriever, question)
        assert view.ids(again) == view.ids(items)
        assert view.scores(again) == view.scores(items)


def check_held_out_coverage(
    view: ResultView,
    retriever: Any,
    cal: RetrievalCalibration,
    observations: Sequence[PoolObservation],
    squad_questions: Sequence[Any],
    dropin_split: Any,
) -> None:
    """Every held-out set equals the core's set on the same pool, and coverage is about 1 - alpha."""
    covered, sizes = [], []
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        ids = view.ids(view.retrieve(retriever, ex.question))
        hit = any(g in ids for g in ex.gold_ids)
        assert (hit, len(ids)) == observations[i].covered_and_size(cal.score_family_, cal.threshold_), ex.question
        covered.append(hit)
        sizes.append(len(ids))
    coverage = assert_covers_within_3_sd(covered, cal.n_calibration_, ALPHA)
    assert coverage < 1.0  # a threshold that keeps everything would be useless, not "covering"
    assert 1.0 <= float(np.mean(sizes)) <= 3.0, np.mean(sizes)


def covered_question(
    view: ResultView, retriever: Any, squad_questions: Sequence[Any], dropin_split: Any, min_size: int = 1
) -> tuple[Any, list[Any]]:
    """The first held-out question whose set (returned too) holds a gold chunk and at least ``min_size`` items."""
    for i in dropin_split.held_out:
        ex = squad_questions[i]
        items = view.retrieve(retriever, ex.question)
        if len(items) >= min_size and any(g in view.ids(items) for g in ex.gold_ids):
            return ex, items
    raise AssertionError(f"no held-out question has a covered set of size >= {min_size}")


def check_same_sets(view: ResultView, a: Any, b: Any, questions: Sequence[str]) -> None:
    """Two conformal retrievers return the same ids, scores and metadata for every question."""
    for question in questions:
        got_a, got_b = view.retrieve(a, question), view.retrieve(b, question)
        assert view.ids(got_a) == view.ids(got_b)
        assert view.scores(got_a) == view.scores(got_b)
        assert view.metadata(got_a) == view.metadata(got_b)


def check_max_k_cut(view: ResultView, capped: Any, question: str, full: Sequence[Any]) -> None:
    """``max_k=1`` on a larger set warns, keeps the best item and flags it as not guaranteed."""
    with pytest.warns(GuaranteeCutWarning, match="max_k=1"):
        items = view.retrieve(capped, question)
    assert view.ids(items) == view.ids(full)[:1]
    assert view.metadata(items)[0]["conformal_guaranteed"] is False
    assert view.metadata(items)[0]["conformal_set_size"] == len(full)


def check_min_k_pads(view: ResultView, padded: Any, question: str, full: Sequence[Any]) -> None:
    """``min_k=len(full) + 3`` pads the set after its own items, silently, and the set stays guaranteed."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", GuaranteeCutWarning)
        more = view.retrieve(padded, question)
    assert len(more) == len(full) + 3
    assert view.ids(more)[: len(full)] == view.ids(full)
    assert all(meta["conformal_guaranteed"] for meta in view.metadata(more))


def check_vector_store_sets(
    view: ResultView,
    retriever: Any,
    cal: RetrievalCalibration,
    dense: Sequence[PoolObservation],
    squad_questions: Sequence[Any],
    dropin_split: Any,
) -> None:
    """A calibration on the store itself (150 questions): the core quantile and set sizes, sync and async."""
    assert cal.threshold_ == conformal_quantile(
        [dense[i].score("relative") for i in dropin_split.calibration[:150]], ALPHA
    )
    for i in dropin_split.held_out[:5]:
        question = squad_questions[i].question
        items = view.retrieve(retriever, question)
        assert items and all(meta["conformal_threshold"] == cal.threshold_ for meta in view.metadata(items))
        assert len(items) == dense[i].covered_and_size("relative", cal.threshold_)[1]
        assert view.ids(view.aretrieve(retriever, question)) == view.ids(items)
