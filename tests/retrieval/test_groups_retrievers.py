"""Both frameworks' ConformalRetriever with a per-group calibration: the group's threshold, pooled otherwise."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import pytest

from conformal_rag_plugins.core.errors import ConformalError, SmallGroupWarning
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.serving import ServingOptions

pytestmark = pytest.mark.integration

N_CAL = 120
TINY = 5


def _article(ex) -> str:
    return ex.gold_ids[0].split("#")[0]


@pytest.fixture(scope="module")
def grouped_examples(dropin_examples):
    """120 calibration questions labelled by article in metadata; 5 relabelled into a too-small group."""
    out = []
    for i, ex in enumerate(dropin_examples[:N_CAL]):
        label = "tiny" if i < TINY else _article(ex)
        out.append(replace(ex, metadata=ex.metadata | {"article": label}))
    return out


def _calibrate(framework: str, host_factory, examples):
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import calibrate_retriever
    else:
        from conformal_rag_plugins.langchain import calibrate_retriever
    host = host_factory(framework, "hybrid").host
    with pytest.warns(SmallGroupWarning, match="'tiny' has 5"):
        cal = calibrate_retriever(
            host,
            examples,
            confidence_level=0.8,  # every article's ~24 questions reach a flagged rank at 0.8 (18 are needed at 0.9)
            options=RetrievalOptions(group_by="article", progress=False),
        )
    return host, cal


def _pooled_fallback(data: dict) -> dict:
    """The same file as calibrated with ``group_fallback="pooled"``: small groups stored with the pooled threshold."""
    from conformal_rag_plugins.storage.jsonio import with_checksum

    data = {k: v for k, v in data.items() if k != "checksum"} | {"group_fallback": "pooled"}
    data["groups"] = {
        g: v if v["source"] == "group" else {**v, "threshold": data["threshold"], "source": "pooled-small-group"}
        for g, v in data["groups"].items()
    }
    return with_checksum(data)


def _meta(framework: str, results) -> list[dict]:
    return [r.node.metadata if framework == "llamaindex" else r.metadata for r in results]


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_retriever_uses_the_group_threshold_and_says_pooled_otherwise(
    framework, host_factory, grouped_examples, squad_questions, tmp_path
) -> None:
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever
    host, cal = _calibrate(framework, host_factory, grouped_examples)
    assert cal.group_by_ == "article" and cal.groups_["tiny"]["source"] == "keep-all-small-group"
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "grouped.json"))  # recomputed on load
    assert loaded.groups_ == cal.groups_
    question = next(ex.question for ex in squad_questions if _article(ex) == "Normans")
    kw = {"retriever": host, "calibration": loaded}

    def run(retriever, **call):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = retriever.retrieve(question) if framework == "llamaindex" else retriever.invoke(question, **call)
            return _meta(framework, got)

    expected = {  # keep-all: +inf, every candidate; the returned pool is not guaranteed to hold the gold
        "Normans": (loaded.groups_["Normans"]["threshold"], "group", True),
        "tiny": (math.inf, "keep-all-small-group", False),
        "Atlantis": (math.inf, "keep-all-unknown-group", False),
    }
    for group, (threshold, source, guaranteed) in expected.items():
        metas = run(ConformalRetriever(**kw, options=ServingOptions(group=group)))
        assert metas and all(m["conformal_group"] == group for m in metas)
        assert all(m["conformal_threshold_source"] == source and m["conformal_threshold"] == threshold for m in metas)
        assert all(m["conformal_guaranteed"] is guaranteed for m in metas)
    pooled = RetrievalCalibration.from_dict(_pooled_fallback(loaded.to_dict()))
    for group, source in (("tiny", "pooled-small-group"), ("Atlantis", "pooled-unknown-group")):
        metas = run(ConformalRetriever(retriever=host, calibration=pooled, options=ServingOptions(group=group)))
        assert all(m["conformal_threshold"] == pooled.threshold_ for m in metas)
        assert all(m["conformal_threshold_source"] == source for m in metas)
        assert not any(m["conformal_guaranteed"] for m in metas)  # not the group's own threshold
    by_question = ConformalRetriever(
        **kw, options=ServingOptions(group_by=lambda q: "Normans" if "Norm" in q else "Atlantis")
    )
    assert run(by_question)[0]["conformal_threshold_source"] == "group"
    if framework == "langchain":  # per call: invoke(q, group=...) overrides the retriever's group
        metas = run(ConformalRetriever(**kw, options=ServingOptions(group="Normans")), group="Atlantis")
        assert metas[0]["conformal_threshold_source"] == "keep-all-unknown-group"

    def boom(q: str) -> str:
        raise RuntimeError("tenant service down")

    with pytest.raises(ConformalError, match="group_by raised RuntimeError"):
        run(ConformalRetriever(**kw, options=ServingOptions(group_by=boom)))
    ungrouped = replace(loaded, groups_={}, group_labels_=(), group_by_=None)
    with pytest.raises(ConformalError, match="needs a per-group calibration"):
        ConformalRetriever(retriever=host, calibration=ungrouped, options=ServingOptions(group="Normans"))
