"""The leaner per-query path of both ConformalRetrievers returns exactly what the former one did.

The former ``_select`` bodies are kept here as oracles; inputs are synthetic (no model, no store).
"""

from __future__ import annotations

import random
import re
import warnings
from types import SimpleNamespace

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, GuaranteeCutWarning
from conformal_rag_plugins.core.retrieval_scores import candidate_nonconformity
from conformal_rag_plugins.core.selection import decide_set
from conformal_rag_plugins.langchain.retriever import ConformalRetriever as LCRetriever
from conformal_rag_plugins.llamaindex.host import pool_from_nodes
from conformal_rag_plugins.llamaindex.retriever import ConformalRetriever as LIRetriever
from conformal_rag_plugins.retrieval.serving import CONFORMAL_METADATA_KEYS, ServingOptions


def legacy_li_select(self, nodes):
    pool, ordered = pool_from_nodes(nodes)
    cal = self.calibration
    min_k, max_k = self.options.min_k, self.options.max_k
    decision = decide_set(cal.score_family_, pool.scores, cal.threshold_, min_k=min_k, max_k=max_k)
    nonconf = candidate_nonconformity(cal.score_family_, pool.scores)
    out = []
    for i in decision.indices:
        node = ordered[i].node.model_copy(deep=False)
        node.metadata = dict(node.metadata) | {
            "conformal_score": float(pool.scores[i]),
            "conformal_nonconformity": float(nonconf[i]),
            "conformal_threshold": cal.threshold_,
            "conformal_alpha": cal.alpha_,
            "conformal_score_family": cal.score_family_,
            "conformal_set_size": decision.conformal_size,
            "conformal_guaranteed": decision.guaranteed,
        }
        for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
            keys = list(getattr(node, attr, []) or [])
            setattr(node, attr, keys + [k for k in CONFORMAL_METADATA_KEYS if k not in keys])
        out.append(NodeWithScore(node=node, score=float(pool.scores[i])))
    return out


def legacy_lc_select(self, docs, scores, k):
    cal = self.calibration
    caps = [c for c in (k, self.k, self.options.max_k) if c is not None]  # the former ConformalRetriever._cap(k)
    cap = min(caps) if caps else None
    decision = decide_set(cal.score_family_, scores, cal.threshold_, min_k=self.options.min_k, max_k=cap)
    nonconf = candidate_nonconformity(cal.score_family_, scores)
    out = []
    for i in decision.indices:
        doc = docs[i]
        meta = dict(doc.metadata) | {
            "score": float(scores[i]),
            "conformal_nonconformity": float(nonconf[i]),
            "conformal_threshold": cal.threshold_,
            "conformal_alpha": cal.alpha_,
            "conformal_score_family": cal.score_family_,
            "conformal_set_size": decision.conformal_size,
            "conformal_guaranteed": decision.guaranteed,
        }
        out.append(Document(id=doc.id, page_content=doc.page_content, metadata=meta))
    return out


CASES = [
    (family, threshold, min_k, max_k)
    for family, thresholds in (("relative", (0.0, 0.05, 0.3)), ("similarity", (-0.9, -0.5)), ("rank", (1.0, 4.5)))
    for threshold in (*thresholds, float("inf"))
    for min_k, max_k in ((None, None), (3, None), (None, 2), (0, 1), (5, 7))
]


def _nodes(seed: int, n: int = 12, *, shuffled: bool) -> list[NodeWithScore]:
    rng = random.Random(seed)
    scores = sorted((round(rng.random(), 2) for _ in range(n)), reverse=True)  # rounding makes ties
    nodes = [
        NodeWithScore(
            node=TextNode(
                id_=f"n{i}",
                text=f"text {i}",
                metadata={"source": f"s{i}", "conformal_alpha": "stale"} if i % 3 == 0 else {"source": f"s{i}"},
                excluded_llm_metadata_keys=["source"] if i % 2 else [],
            ),
            score=s,
        )
        for i, s in enumerate(scores)
    ]
    if shuffled:
        rng.shuffle(nodes)
    return nodes


def _same_nodes(old, new):
    assert len(old) == len(new)
    for a, b in zip(old, new, strict=True):
        assert type(a) is type(b) and type(a.node) is type(b.node)
        assert a == b
        assert list(a.node.metadata) == list(b.node.metadata)
        assert a.node.model_fields_set == b.node.model_fields_set
        assert a.model_fields_set == b.model_fields_set
        assert all(type(v) is type(b.node.metadata[k]) for k, v in a.node.metadata.items())


@pytest.mark.parametrize(("family", "threshold", "min_k", "max_k"), CASES)
@pytest.mark.parametrize("shuffled", [False, True])
def test_llamaindex_select_matches_former(family, threshold, min_k, max_k, shuffled):
    retriever = LIRetriever.__new__(LIRetriever)
    retriever.calibration = SimpleNamespace(score_family_=family, threshold_=threshold, alpha_=0.1)
    retriever.options = ServingOptions(min_k=min_k, max_k=max_k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuaranteeCutWarning)
        for seed in range(5):
            nodes = _nodes(seed, shuffled=shuffled)
            _same_nodes(legacy_li_select(retriever, list(nodes)), retriever._select(list(nodes)))
            originals = [n.node.metadata for n in nodes]
            retriever._select(nodes)
            assert [n.node.metadata for n in nodes] == originals  # host nodes untouched


def test_llamaindex_select_refuses_missing_and_nan_scores_as_before():
    retriever = LIRetriever.__new__(LIRetriever)
    retriever.calibration = SimpleNamespace(score_family_="relative", threshold_=0.1, alpha_=0.1)
    retriever.options = ServingOptions()
    for bad in (None, float("nan")):
        nodes = _nodes(0, shuffled=False)
        nodes[3] = NodeWithScore(node=nodes[3].node, score=bad)
        with pytest.raises(CalibrationError) as new:
            retriever._select(nodes)
        with pytest.raises(CalibrationError) as old:
            legacy_li_select(retriever, nodes)
        assert str(new.value) == str(old.value)


@pytest.mark.parametrize(("family", "threshold", "min_k", "max_k"), CASES)
@pytest.mark.parametrize("k", [None, 4])
def test_langchain_select_matches_former(family, threshold, min_k, max_k, k):
    retriever = LCRetriever.model_construct(
        calibration=SimpleNamespace(score_family_=family, threshold_=threshold, alpha_=0.1),
        options=ServingOptions(min_k=min_k, max_k=max_k),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuaranteeCutWarning)
        for seed in range(5):
            nodes = _nodes(seed, shuffled=False)
            docs = [Document(id=n.node.node_id, page_content=n.node.text, metadata=n.node.metadata) for n in nodes]
            scores = [n.score for n in nodes]
            try:
                old = legacy_lc_select(retriever, docs, scores, k)
            except ConformalError as exc:  # crossed bounds (min_k > k): the same error both ways
                for checked in (False, True):
                    with pytest.raises(ConformalError, match=re.escape(str(exc))):
                        retriever._select(docs, scores, k, checked=checked)
                continue
            for new in (retriever._select(docs, scores, k), retriever._select(docs, scores, k, checked=True)):
                assert len(old) == len(new)
                for a, b in zip(old, new, strict=True):
                    assert type(a) is type(b) and a == b
                    assert list(a.metadata) == list(b.metadata)
                    assert a.model_fields_set == b.model_fields_set
                    assert all(type(v) is type(b.metadata[key]) for key, v in a.metadata.items())
