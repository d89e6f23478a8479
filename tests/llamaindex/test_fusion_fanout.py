"""The fan-out behind ``evaluate``'s tuning returns, for every fusion setting and pool size, the pool the real
host built with that setting and pool size returns: the same scores bit for bit, and the same ids in the same
order except among documents with tied scores (bm25s orders tied documents differently for another top-k)."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/fusion_fanout.py

from __future__ import annotations

import numpy as np
import pytest

from conformal_rag_plugins.commands.hosts import build_fanout, build_hosts
from conformal_rag_plugins.tuning.fusion_config import DEFAULT_FUSION_GRID

pytestmark = pytest.mark.integration

POOLS = (10, 50, 120)


def _assert_same_pool(got, expected, where) -> None:
    assert np.array_equal(got.scores, expected.scores), where
    text_of = dict(zip(expected.ids, expected.texts, strict=True))
    assert all(text_of[i] == t for i, t in zip(got.ids, got.texts, strict=True) if i in text_of), where
    for value in np.unique(got.scores):
        ours = {i for i, s in zip(got.ids, got.scores, strict=True) if s == value}
        theirs = {i for i, s in zip(expected.ids, expected.scores, strict=True) if s == value}
        assert ours == theirs, (where, value)
    untied = [i for i in range(len(got.ids)) if np.sum(got.scores == got.scores[i]) == 1]
    assert [got.ids[i] for i in untied] == [expected.ids[i] for i in untied], where


def _questions(squad_questions, n=6):
    rng = np.random.default_rng(3)
    return [squad_questions[i].question for i in rng.choice(len(squad_questions), n, replace=False)]


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_fanout_pools_equal_the_hosts_pools(framework, squad_entries, squad_questions, chroma_memory_client):
    fan = build_fanout(
        framework, "hybrid", squad_entries, grid=DEFAULT_FUSION_GRID, pool_sizes=POOLS, client=chroma_memory_client
    )
    hosts = {
        k: build_hosts(
            framework, "hybrid", squad_entries, grid=DEFAULT_FUSION_GRID, pool_size=k, client=chroma_memory_client
        )
        for k in POOLS
    }
    compared = 0
    for question in _questions(squad_questions):
        pools = fan(question)
        assert set(pools) == {(c, k) for c in DEFAULT_FUSION_GRID for k in POOLS}
        for (config, k), pool in pools.items():
            _assert_same_pool(pool, hosts[k][config].fetch(question), (question, config, k))
            compared += 1
    assert compared == 6 * len(DEFAULT_FUSION_GRID) * len(POOLS)


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
@pytest.mark.parametrize("kind", ["dense", "bm25"])
def test_single_retriever_fanout_equals_the_host(framework, kind, squad_entries, squad_questions, chroma_memory_client):
    fan = build_fanout(framework, kind, squad_entries, grid=(), pool_sizes=(50, 20), client=chroma_memory_client)
    for k in (20, 50):
        host = next(
            iter(build_hosts(framework, kind, squad_entries, pool_size=k, client=chroma_memory_client).values())
        )
        for question in _questions(squad_questions, 5):
            _assert_same_pool(fan(question)[(None, k)], host.fetch(question), (question, k))
