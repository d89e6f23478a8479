"""``evaluate`` embeds and searches its questions in batches (``FusionFanout.many``), and the batched pools are
the one-question pools: the same ids in the same order, the same texts, the same scores bit for bit, on the real
stack (MiniLM, Chroma, bm25s) of both frameworks.

The query vectors come from the encoder's cache in both paths, so the comparison isolates the batched searches and
fusion; a vector first computed in a batch may differ from a one-question computation in the last float32 bits.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from conformal_rag_plugins.commands import unit_candidates
from conformal_rag_plugins.commands.hosts import build_fanout
from conformal_rag_plugins.commands.unit_candidates import CandidateSpace, collect_candidates
from conformal_rag_plugins.tuning.fusion_config import DEFAULT_FUSION_GRID

pytestmark = pytest.mark.integration

POOLS = (10, 50, 120)
#: Questions a batch must not trip over: nothing but punctuation, only stop words, only words the corpus lacks.
ODD_QUESTIONS = ("?", "what is the of and", "zqxjv wvutq plorkh")


def _questions(squad_questions, n: int = 37) -> list[str]:
    rng = np.random.default_rng(11)
    picked = [squad_questions[i].question for i in rng.choice(len(squad_questions), n, replace=False)]
    return [*picked[:10], *ODD_QUESTIONS, *picked[10:]]


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
@pytest.mark.parametrize("kind", ["hybrid", "dense", "bm25"])
def test_batched_pools_equal_one_question_pools(framework, kind, squad_entries, squad_questions, chroma_memory_client):
    grid = DEFAULT_FUSION_GRID if kind == "hybrid" else ()
    fan = build_fanout(framework, kind, squad_entries, grid=grid, pool_sizes=POOLS, client=chroma_memory_client)
    questions = _questions(squad_questions)
    batched = list(fan.many(questions, batch_size=16))  # three blocks, the last one short
    assert len(batched) == len(questions)
    keys = {(c, k) for c in grid for k in POOLS} if grid else {(None, k) for k in POOLS}
    for question, got in zip(questions, batched, strict=True):
        expected = fan(question)
        assert set(got) == set(expected) == keys
        for key, pool in expected.items():
            where = (question, key)
            assert got[key].ids == pool.ids, where
            assert got[key].texts == pool.texts, where
            assert np.array_equal(got[key].scores, pool.scores), where
    # Control: the pools differ between questions, so equal pools above are not a constant answer.
    first = (DEFAULT_FUSION_GRID[0] if grid else None, POOLS[-1])
    assert len({batched[i][first].ids for i in range(len(questions))}) > len(questions) // 2


class _Calls:
    """Records the questions each call of a wrapped method received."""

    def __init__(self, questions: list[str]) -> None:
        self.questions = set(questions)
        self.sizes: list[int] = []

    def wrap(self, fn, texts_of):
        def spy(*args, **kwargs):
            texts = texts_of(*args, **kwargs)
            if texts is not None:
                n = sum(1 for t in texts if isinstance(t, str) and t in self.questions)
                if n:
                    self.sizes.append(n)
            return fn(*args, **kwargs)

        return spy


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_evaluate_embeds_and_searches_questions_in_batches(
    framework, monkeypatch, squad_entries, squad_questions, chroma_memory_client
):
    """A spy on the encoder, on Chroma's query and on bm25s: 40 questions take one call of each, not 40, and the
    observations equal those of the one-question path."""
    import bm25s
    from chromadb.api.models.Collection import Collection

    from conformal_rag_plugins.local.encoder import MiniLMEncoder

    examples = list(squad_questions[:40])
    texts = [ex.question for ex in examples]

    def collect():
        return collect_candidates(
            framework,
            "hybrid",
            squad_entries,
            examples,
            None,
            space=CandidateSpace(units=["chunk"], grid=DEFAULT_FUSION_GRID, pool_sizes=[50]),
            client=chroma_memory_client,
            progress=False,
        )

    collect()  # the index exists and every question vector is cached before counting
    embedded, queried = _Calls(texts), Counter()
    monkeypatch.setattr(
        MiniLMEncoder, "encode", embedded.wrap(MiniLMEncoder.encode, lambda self, batch, **kw: list(batch))
    )
    original_query = Collection.query

    def query(self, *args, **kwargs):
        queried["chroma"] += 1
        queried["chroma_vectors"] += len(kwargs.get("query_embeddings") or [])
        return original_query(self, *args, **kwargs)

    original_retrieve = bm25s.BM25.retrieve

    def retrieve(self, *args, **kwargs):
        queried["bm25"] += 1
        return original_retrieve(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "query", query)
    monkeypatch.setattr(bm25s.BM25, "retrieve", retrieve)
    batched = collect()
    assert embedded.sizes == [40], embedded.sizes
    assert queried == Counter({"chroma": 1, "chroma_vectors": 40, "bm25": 1}), queried

    # The same observations from one question at a time.
    monkeypatch.setattr(
        unit_candidates, "_pools_of_each", lambda fetch, qs: map(fetch, qs) if fetch is not None else [{}] * len(qs)
    )
    one_by_one = collect()
    assert set(batched.observations) == set(one_by_one.observations)
    for key, observations in batched.observations.items():
        for a, b in zip(observations, one_by_one.observations[key], strict=True):
            assert np.array_equal(a.scores, b.scores) and a.gold_positions == b.gold_positions, key
            assert np.array_equal(a.costs, b.costs), key
