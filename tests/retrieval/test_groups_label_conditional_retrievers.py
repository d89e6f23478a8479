"""Both frameworks with a label-conditional calibration on the real hybrid host: each chunk gets its group's threshold.

The bundled stack stores each SQuAD paragraph's article in its metadata (``title``); the
distractor passages have none. ``calibrate_retriever(..., options=RetrievalOptions(chunk_group_key="title"))`` then
calibrates one threshold per article (each question counts in its gold chunk's article, read
from the host's own chunks), and the retriever keeps every chunk against its own article's
threshold. A distractor has no calibrated group: it is kept (``+inf``) and the set says it is
not guaranteed, or, with ``group_fallback="pooled"``, gets the pooled threshold, also not guaranteed.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import pytest

from conformal_rag_plugins.core.errors import ConformalError
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import ServingOptions

pytestmark = pytest.mark.integration

N_CAL = 120


def _article(ex) -> str:
    return ex.gold_ids[0].split("#")[0]


def _calibrate(framework: str, host, examples, **kw) -> RetrievalCalibration:
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import calibrate_retriever
    else:
        from conformal_rag_plugins.langchain import calibrate_retriever
    return calibrate_retriever(
        host,
        examples,
        confidence_level=0.8,  # every article's ~24 questions reach a flagged rank at 0.8 (18 are needed at 0.9)
        options=RetrievalOptions(chunk_group_key="title", progress=False, **kw),
    )


def _title(framework: str, r) -> tuple[str | None, dict]:
    meta = r.node.metadata if framework == "llamaindex" else r.metadata
    return (meta.get("title") or None), meta


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_each_chunk_is_kept_against_its_own_article(framework, host_factory, dropin_examples, tmp_path) -> None:
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever
    host = host_factory(framework, "hybrid").host
    # half the questions name their gold chunk's article, half leave it to the host's chunk metadata
    examples = [
        replace(ex, metadata=ex.metadata | {"title": _article(ex)}) if i % 2 else ex
        for i, ex in enumerate(dropin_examples[:N_CAL])
    ]
    cal = _calibrate(framework, host, examples)
    assert cal.chunk_group_key_ == "title" and set(cal.groups_) == {_article(ex) for ex in examples}
    assert sum(v["n"] for v in cal.groups_.values()) == N_CAL
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "chunk_groups.json"))
    assert loaded.chunk_group_key_ == "title" and loaded.groups_ == cal.groups_
    retriever = ConformalRetriever(retriever=host, calibration=loaded)
    question = next(ex.question for ex in dropin_examples[N_CAL:] if _article(ex) == "Normans")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = retriever.retrieve(question) if framework == "llamaindex" else retriever.invoke(question)
    assert got
    seen_articles = set()
    for r in got:
        title, meta = _title(framework, r)
        if title is None:  # a distractor: no calibrated group, kept whole
            assert meta["conformal_threshold"] == math.inf
            assert meta["conformal_threshold_source"] == "keep-all-unknown-group"
        else:
            seen_articles.add(title)
            assert meta["conformal_group"] == title
            assert meta["conformal_threshold"] == loaded.groups_[title]["threshold"]
            assert meta["conformal_threshold_source"] == "group"
            assert meta["conformal_nonconformity"] <= meta["conformal_threshold"]
    assert "Normans" in seen_articles
    # distractors are in every hybrid pool of this corpus: no set claims a guarantee it does not have
    assert not any(_title(framework, r)[1]["conformal_guaranteed"] for r in got)
    with pytest.raises(ConformalError, match="per-chunk-group thresholds"):
        ConformalRetriever(retriever=host, calibration=loaded, options=ServingOptions(group="Normans"))


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_a_wrong_label_or_two_groupings_are_refused(framework, host_factory, dropin_examples) -> None:
    host = host_factory(framework, "hybrid").host
    examples = [replace(ex, metadata=ex.metadata | {"title": "Atlantis"}) for ex in dropin_examples[:20]]
    with pytest.raises(ConformalError, match="says its gold chunk is in title='Atlantis'"):
        _calibrate(framework, host, examples)
    with pytest.raises(ConformalError, match="not both"):
        _calibrate(framework, host, dropin_examples[:20], group_by="title")


def test_pooled_fallback_gives_distractors_the_pooled_threshold_not_guaranteed(host_factory, dropin_examples) -> None:
    from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor

    bundle = host_factory("llamaindex", "hybrid")
    cal = _calibrate("llamaindex", bundle.host, dropin_examples[:N_CAL], group_fallback="pooled")
    nodes = bundle.host.retrieve(dropin_examples[N_CAL].question)
    assert any(not n.node.metadata.get("title") for n in nodes)  # the pool holds distractors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ConformalNodePostprocessor(calibration=cal).postprocess_nodes(nodes, query_str="q")
    distractors = [n.node.metadata for n in got if not n.node.metadata.get("title")]
    assert all(m["conformal_threshold"] == cal.threshold_ for m in distractors)
    assert all(m["conformal_threshold_source"] == "pooled-unknown-group" for m in distractors)
    assert not any(n.node.metadata["conformal_guaranteed"] for n in got)
