"""The Chroma server route: ``chroma run`` on loopback, ``chroma_client(host=..., port=...)``, both frameworks.

The calibration made over HTTP must be the calibration made in-process on the same passages: the server only
moves the index out of the process, it must not change a single score.
"""

from __future__ import annotations

import socket

import pytest

from conformal_rag_plugins.commands.hosts import build_host
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

pytestmark = [pytest.mark.integration, pytest.mark.server]

HOST = "127.0.0.1"
N_PASSAGES = 300  # all 173 SQuAD paragraphs + 127 distractors
N_CALIBRATION = 150


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def chroma_server(start_chroma_server):
    """A ``chroma run`` process on a free loopback port (stopped at the end of the session)."""
    return start_chroma_server(HOST, _free_port())


@pytest.fixture(scope="module")
def entries(squad_entries):
    return squad_entries[:N_PASSAGES]


@pytest.fixture(scope="module")
def examples(squad_questions, entries):
    ids = {e.id for e in entries}
    usable = [q for q in squad_questions if set(q.gold_ids) <= ids]
    assert len(usable) == len(squad_questions)  # every gold passage is among the first 173
    return usable


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_calibrate_and_retrieve_over_http(chroma_server, framework, entries, examples):
    from conformal_rag_plugins.local.chroma import chroma_client

    client = chroma_client(host=HOST, port=chroma_server)
    assert client.heartbeat() > 0
    bundle = build_host(framework, "hybrid", entries, client=client)
    collections = [getattr(c, "name", c) for c in client.list_collections()]
    assert any(str(name).startswith(f"crp-{framework}-") for name in collections)
    cal_set, held_out = examples[:N_CALIBRATION], examples[N_CALIBRATION : N_CALIBRATION + 40]

    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

        cal = calibrate_retriever(
            bundle.host,
            cal_set,
            confidence_level=0.9,
            options=RetrievalOptions(progress=False),
        )
        retriever = ConformalRetriever(retriever=bundle.host, calibration=cal)

        def retrieve(q: str) -> list[tuple[str, dict]]:
            return [(n.node.node_id, n.node.metadata) for n in retriever.retrieve(q)]
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

        cal = calibrate_retriever(
            bundle.host,
            cal_set,
            confidence_level=0.9,
            options=RetrievalOptions(progress=False),
        )
        retriever = ConformalRetriever(retriever=bundle.host, calibration=cal)

        def retrieve(q: str) -> list[tuple[str, dict]]:
            return [(d.id, d.metadata) for d in retriever.invoke(q)]

    assert cal.n_calibration_ == N_CALIBRATION and 0 < cal.threshold_ < float("inf")
    # the same passages in an in-process Chroma give the same pools, hence the same threshold (up to the float32
    # rounding of distances on the HTTP route: ~3e-8 after LangChain's z-score fusion)
    from conformal_rag_plugins.local.chroma import chroma_client as local_client

    local = build_host(framework, "hybrid", entries, client=local_client())
    local_obs = collect_observations(cal_set, local.fetch, progress=False)
    assert cal.threshold_ == pytest.approx(conformal_quantile([o.score("relative") for o in local_obs], 0.1), rel=1e-6)

    hits = 0
    for ex in held_out:
        got = retrieve(ex.question)
        assert got and all(m["conformal_threshold"] == cal.threshold_ for _, m in got)
        assert all(m["conformal_guaranteed"] for _, m in got)
        hits += any(i in ex.gold_ids for i, _ in got)
    assert hits / len(held_out) >= 0.75, hits  # ~0.9 expected; 3 sd of a 40-question binomial is 0.14
