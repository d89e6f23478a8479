"""``calibrate_retriever(..., control="recall")`` in both frameworks, and the ConformalRetriever that uses it.

On the short bundled passages each question has one gold paragraph, so conformal risk
control of ``1 - recall`` must give exactly the split-conformal threshold of the drop-in
calibration on the same questions (the statistical module checks several gold chunks).
"""

from __future__ import annotations

import pytest

from conformal_rag_plugins.core.quantile import crc_threshold, ltt_threshold
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.options import RetrievalOptions

pytestmark = pytest.mark.integration

FRAMEWORKS = ("llamaindex", "langchain")


def _adapter(framework: str):
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

        return calibrate_retriever, ConformalRetriever, lambda r, q: [n.node.node_id for n in r.retrieve(q)]
    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    return calibrate_retriever, ConformalRetriever, lambda r, q: [d.id for d in r.invoke(q)]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_recall_calibration_drives_the_conformal_retriever(
    framework, request, host_factory, dropin_examples, squad_questions, dropin_split, tmp_path
) -> None:
    calibrate, Conformal, ids = _adapter(framework)
    host = host_factory(framework, "hybrid").host
    split = request.getfixturevalue("li_hybrid_calibration" if framework == "llamaindex" else "lc_hybrid_calibration")
    cal = calibrate(
        host,
        dropin_examples,
        confidence_level=0.9,
        options=RetrievalOptions(control="recall", progress=False),
    )
    assert (cal.risk_, cal.method_, cal.score_family_) == ("recall", "crc", "relative")
    assert all(len(g) == 1 for g in cal.gold_scores_)  # one gold paragraph per question
    # one gold each: CRC of the in-pool loss at about alpha/2 (it holds given the flag), at least the split one
    assert cal.scores_ == split.scores_ and cal.threshold_ == crc_threshold(cal.gold_scores_, 0.1) >= split.threshold_
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "recall.json"))
    assert loaded == cal and loaded.risk_ == "recall"
    recall_retriever = Conformal(retriever=host, calibration=loaded)
    split_retriever = Conformal(retriever=host, calibration=split)
    for i in dropin_split.held_out[:4]:
        q = squad_questions[i].question
        assert set(ids(split_retriever, q)) <= set(ids(recall_retriever, q))
    ltt = calibrate(
        host,
        dropin_examples[:120],
        confidence_level=0.8,
        options=RetrievalOptions(method="ltt", delta=0.1, control="recall", progress=False),
    )
    assert (ltt.method_, ltt.delta_) == ("ltt", 0.1)
    assert ltt.threshold_ == ltt_threshold(ltt.gold_scores_, 0.2, 0.1)
    assert "risk=recall" in ltt.summary() and "delta=0.1" in ltt.summary()
