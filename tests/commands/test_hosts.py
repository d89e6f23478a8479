"""``commands/hosts.py`` hands each adapter one ``IndexRequest`` (kind, entries, grid, pool sizes, collection).

A recording adapter stands in for LlamaIndex and LangChain, so nothing is embedded: the request each
module function builds is read back field by field. That the real adapters turn a request into the
same hosts and pools is ``tests/llamaindex/test_fusion_fanout.py`` (integration).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformal_rag_plugins.commands import hosts
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.frameworks import IndexRequest, collection_name
from conformal_rag_plugins.tuning.fusion_config import FusionConfig

ENTRIES = [CorpusEntry("a#0", "Normandy is a region."), CorpusEntry("b#0", "Rollo ruled it.")]
GRID = (FusionConfig("zscore", 0.5), FusionConfig("minmax", 0.3))


class Recording:
    """An adapter that keeps the requests it is given and builds one named host per fusion setting."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, IndexRequest]] = []

    def build_hosts(self, request: IndexRequest) -> dict[FusionConfig | None, Any]:
        self.requests.append(("hosts", request))
        fusions = list(request.grid) if request.kind == "hybrid" else [None]
        return {c: (f"host-{c}-{request.pool_size}", lambda q: q) for c in fusions}

    def build_fanout(self, request: IndexRequest) -> Any:
        self.requests.append(("fanout", request))
        return "fanout"


@pytest.fixture
def adapter(monkeypatch: pytest.MonkeyPatch) -> Recording:
    recording = Recording()
    monkeypatch.setattr(hosts, "get_framework", lambda name: recording)
    return recording


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_build_hosts_passes_one_request_with_its_one_pool_size(framework: str, adapter: Recording) -> None:
    client = object()
    bundles = hosts.build_hosts(framework, "hybrid", ENTRIES, grid=GRID, pool_size=7, client=client)
    (what, request), = adapter.requests  # fmt: skip
    assert what == "hosts"
    assert request == IndexRequest(
        "hybrid", ENTRIES, grid=GRID, pool_sizes=(7,), client=client,
        collection_name=collection_name(framework, ENTRIES), show_progress=False, whole_documents=False,
    )  # fmt: skip
    assert request.collection_name == f"crp-{framework}-{hosts.corpus_key(ENTRIES)}"
    assert {c: (b.host, b.pool_size, b.fusion, b.framework) for c, b in bundles.items()} == {
        c: (f"host-{c}-7", 7, c, framework) for c in GRID
    }


def test_build_host_wraps_its_fusion_in_a_one_point_grid(adapter: Recording) -> None:
    bundle = hosts.build_host("langchain", "hybrid", ENTRIES, pool_size=9, dense_weight=0.25, show_progress=True)
    (_, request), = adapter.requests  # fmt: skip
    assert request.grid == [FusionConfig("zscore", 0.25)] and request.pool_sizes == (9,) and request.show_progress
    assert bundle.fusion == FusionConfig("zscore", 0.25) and bundle.host == f"host-{bundle.fusion}-9"


@pytest.mark.parametrize("whole_documents", [False, True])
def test_build_fanout_passes_every_pool_size_and_the_truncation_choice(
    adapter: Recording, whole_documents: bool
) -> None:
    fan = hosts.build_fanout(
        "llamaindex", "bm25", ENTRIES, grid=(), pool_sizes=(20, 5), whole_documents=whole_documents
    )
    (what, request), = adapter.requests  # fmt: skip
    assert (fan, what) == ("fanout", "fanout")
    assert (request.kind, request.pool_sizes, request.whole_documents) == ("bm25", (20, 5), whole_documents)
    assert request.collection_name == collection_name("llamaindex", ENTRIES) and request.client is None


def test_an_unknown_retriever_is_refused_before_any_request(adapter: Recording) -> None:
    with pytest.raises(ValueError, match="retriever one of"):
        hosts.build_hosts("llamaindex", "sparse", ENTRIES)
    assert adapter.requests == []
