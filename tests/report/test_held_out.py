"""``ConformalRetriever.evaluate``: the report's verdict from Python, both frameworks (issue 34).

A scripted ``serve`` checks the numbers against a hand count; small real LlamaIndex / LangChain
stores over a deterministic bag-of-words embedding (no model) check that the served sets are the
ones measured, that calibration and host-tuning questions are left out, that document-id gold goes
through the one gold-id rule, and that ``k``/``max_k``/parents behave as served.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/langchain/calibrate.py
#   conformal_rag_plugins/langchain/fingerprint.py
#   conformal_rag_plugins/langchain/retrieval_host.py
#   conformal_rag_plugins/llamaindex/calibrate.py
#   conformal_rag_plugins/llamaindex/fingerprint.py
#   conformal_rag_plugins/llamaindex/retrieval_host.py
#   conformal_rag_plugins/retrieval/dropin_init.py

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter

from conformal_rag_plugins import HeldOutReport, ServingOptions, Verdict
from conformal_rag_plugins.core.coverage_band import split_conformal_band
from conformal_rag_plugins.core.errors import CalibrationError, GuaranteeCutWarning
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.report.data import calibrated_verdict, coverage_grid, grid_verdict
from conformal_rag_plugins.report.held_out import held_out_report
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions

from ..fake_embeddings import HashEmbedding, HashEmbeddings

N_DOCS, N_SENT = 12, 6
OPTIONS = RetrievalOptions(confidence_level=0.8, progress=False)
pytestmark = pytest.mark.filterwarnings("ignore::conformal_rag_plugins.core.errors.PoolMissWarning")


def _sentences(d: int) -> list[str]:
    return [f"Sentence {d}-{s} about topic{d} thing{s} and word{d * 7 + s}." for s in range(N_SENT)]


def _answer(d: int, s: int) -> str:
    return f"word{d * 7 + s}"


KEYS = [(d, s) for d in range(N_DOCS) for s in range(N_SENT)]


def _examples() -> list[CalibrationExample]:
    """72 questions labelled with their *document* id and the answer word."""
    return [
        CalibrationExample(
            f"Which word for topic{d} thing{s}?", gold_ids=(f"doc{d}",), answers=(_answer(d, s),), id=f"q{d}-{s}"
        )
        for d, s in KEYS
    ]


def _split() -> tuple[list[int], list[int]]:
    """Seeded calibration / held-out positions of the 72 questions (40 / 32)."""
    order = np.random.default_rng(3).permutation(len(KEYS)).tolist()
    return sorted(order[:40]), sorted(order[40:])


def _hand_count(ask, held: list[int], chunk_of: dict) -> dict[str, float]:
    """Coverage, units and tokens of ``ask(question) -> [(id, text, flag)]`` counted in the test."""
    examples = _examples()
    hits, units, tokens, flagged = [], [], [], []
    for i in held:
        got = ask(examples[i].question)
        hits.append(chunk_of[KEYS[i]] in {g[0] for g in got})
        units.append(len(got))
        tokens.append(sum(count_tokens(g[1]) for g in got))
        flagged.append(all(g[2] is True for g in got))
    n = len(held)
    return {"coverage": sum(hits) / n, "units": sum(units) / n, "tokens": sum(tokens) / n, "flagged": sum(flagged) / n}


def _check_against(report: HeldOutReport, counted: dict[str, float], cal: RetrievalCalibration, n_held: int) -> None:
    assert report.n_questions == n_held
    assert report.coverage == pytest.approx(counted["coverage"])
    assert report.mean_set_size == pytest.approx(counted["units"])
    assert report.mean_context_tokens == pytest.approx(counted["tokens"])
    assert report.share_guaranteed == pytest.approx(counted["flagged"])
    band = split_conformal_band(len(cal.scores_), n_held, cal.alpha_)
    v = report.verdict
    assert (v.band_low, v.band_high) == band and v.coverage == report.coverage and v.target == 0.8
    assert v.n_test == n_held and v.n_calibration == cal.n_calibration_
    assert v.status == ("below" if v.coverage < band[0] else "above" if v.coverage > band[1] else "inside")
    assert report.summary().startswith(v.text + "; ")
    assert f"{report.mean_set_size:.2f} units" in report.summary()
    assert json.loads(json.dumps(report.to_dict()))["verdict"]["status"] == v.status


# ------------------------------------------------------------------------------ framework-free, by hand

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")


def _toy_calibration(**extra) -> RetrievalCalibration:
    scores = tuple(i / 100 for i in range(1, 100))
    ids = tuple(f"cal{i}" for i in range(99))
    return RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 99, 0, scores, FP, question_ids_=ids, **extra)


def test_numbers_by_hand() -> None:
    """Four held-out questions, scripted sets: 3 covered, 9 units, 2 guaranteed (one flagged off, one warned)."""
    cal = _toy_calibration()
    sets = {
        "a?": [("c1", "one two", True), ("c2", "three", True)],  # covered, 2 units
        "b?": [("c9", "x", True)],  # missed
        "c?": [("c3", "Normans", False), ("c4", "y", False), ("c5", "z", False)],  # covered, cut
        "d?": [("c6", "w", True), ("c7", "v", True), ("c8", "u", True)],  # covered by gold text
    }
    held = [
        CalibrationExample("a?", gold_ids=("c2",)),
        CalibrationExample("b?", gold_ids=("c1",)),
        CalibrationExample("c?", gold_ids=("c3", "c0")),
        CalibrationExample("d?", gold_texts=("v",)),
    ]
    words = {"one two": 2, "three": 1, "x": 1, "Normans": 3, "y": 1, "z": 1, "w": 1, "v": 1, "u": 1}

    def serve(question: str) -> list[tuple]:
        if question == "b?":  # a set the retriever warned about is not counted as guaranteed, whatever its flags
            warnings.warn("cut by max_k", GuaranteeCutWarning, stacklevel=2)
        return sets[question]

    with pytest.warns(GuaranteeCutWarning, match="1 of the 4 held-out sets were served without") as caught:
        report = held_out_report(held, cal, prepare_gold=list, serve=serve, count_tokens=words.__getitem__)
    assert len([w for w in caught if issubclass(w.category, GuaranteeCutWarning)]) == 1
    assert (report.n_questions, report.n_excluded) == (4, 0)
    assert report.coverage == 0.75
    assert report.mean_set_size == 9 / 4
    assert report.mean_context_tokens == (3 + 1 + 5 + 3) / 4
    assert report.share_guaranteed == 0.5
    assert report.verdict == calibrated_verdict(cal, 0.75, 4)


def test_the_verdict_is_the_reports_at_the_calibrated_level() -> None:
    """Same coverage -> the same verdict as ``grid_verdict(coverage_grid(...))`` (the CLI's route)."""
    from conformal_rag_plugins.core.pools import PoolObservation

    cal = _toy_calibration()
    rng = np.random.default_rng(0)
    obs = [PoolObservation(np.sort(rng.uniform(0, 1, 5))[::-1], (int(rng.integers(0, 5)),)) for _ in range(60)]
    grid_v = grid_verdict(coverage_grid(cal, obs))
    mine = calibrated_verdict(cal, grid_v.coverage, len(obs))
    assert isinstance(mine, Verdict) and mine == grid_v


def test_calibration_and_tuning_questions_are_left_out() -> None:
    cal = _toy_calibration()
    calibration_q = CalibrationExample("used?", gold_ids=("c1",))
    tuning_q = CalibrationExample("tuned?", gold_ids=("c1",))
    held_q = CalibrationExample("new?", gold_ids=("c1",))
    cal = replace(
        cal,
        question_ids_=(calibration_q.digest, *cal.question_ids_[1:]),
        selection_={"optimisation_question_ids": [tuning_q.digest], "n_optimisation": 1},
    )
    asked: list[str] = []

    def serve(q: str):
        asked.append(q)
        return [("c1", "t", True)]

    report = held_out_report([calibration_q, tuning_q, held_q], cal, prepare_gold=list, serve=serve, count_tokens=len)
    assert asked == ["new?"] and (report.n_questions, report.n_excluded) == (1, 2)
    with pytest.raises(CalibrationError, match="No held-out question"):
        held_out_report([calibration_q, tuning_q], cal, prepare_gold=list, serve=serve, count_tokens=len)
    with pytest.raises(CalibrationError, match="does not record which questions"):
        held_out_report([held_q], replace(cal, question_ids_=()), prepare_gold=list, serve=serve, count_tokens=len)
    old = replace(cal, selection_={"n_optimisation": 5})  # a file saved before the ids were recorded
    with pytest.warns(UserWarning, match="5 questions that tuned the host"):
        held_out_report([held_q], old, prepare_gold=list, serve=serve, count_tokens=len)


def test_a_no_band_calibration_says_so() -> None:
    """Nine calibration questions cannot support 0.95 (threshold +inf): status ``no_band``, band NaN."""
    scores, ids = tuple(i / 10 for i in range(1, 10)), tuple(f"c{i}" for i in range(9))
    cal = RetrievalCalibration(float("inf"), 0.05, "split", "similarity", 5, 9, 0, scores, FP, question_ids_=ids)
    report = held_out_report(
        [CalibrationExample("q?", gold_ids=("a",))], cal, prepare_gold=list, serve=lambda q: [], count_tokens=len
    )
    assert report.verdict.status == "no_band" and math.isnan(report.verdict.band_low)
    assert report.to_dict()["verdict"]["band_low"] is None


# ---------------------------------------------------------------------------------------------- LlamaIndex


@pytest.fixture(scope="module")
def li():
    docs = [Document(text=" ".join(_sentences(d)), id_=f"doc{d}") for d in range(N_DOCS)]
    nodes = SentenceSplitter(chunk_size=30, chunk_overlap=0).get_nodes_from_documents(docs)
    assert len(nodes) > N_DOCS  # every document is split
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding())
    chunk_of = {
        (d, s): next(n.node_id for n in nodes if n.ref_doc_id == f"doc{d}" and _answer(d, s) in n.text) for d, s in KEYS
    }
    return index, docs, chunk_of


def _li_ask(retriever):
    def ask(question: str) -> list[tuple]:
        got = retriever.retrieve(question)
        return [(n.node.node_id, n.node.get_content(), n.node.metadata.get("conformal_guaranteed")) for n in got]

    return ask


def test_llamaindex_evaluate_counts_the_served_sets(li) -> None:
    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

    index, _, chunk_of = li
    examples = _examples()
    cal_pos, held = _split()
    cal = calibrate_retriever(index, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
    retriever = ConformalRetriever(cal, index=index)
    report = retriever.evaluate(examples)  # all 72: the 40 calibration questions are left out
    assert report.n_excluded == 40
    _check_against(report, _hand_count(_li_ask(retriever), held, chunk_of), cal, len(held))
    assert 0 < report.coverage <= 1 and report.share_guaranteed == 1.0
    # document-id gold and node-id gold give the same report
    by_node = [replace(examples[i], gold_ids=(chunk_of[KEYS[i]],)) for i in held]
    assert retriever.evaluate(by_node) == replace(report, n_excluded=0)


def test_llamaindex_max_k_cuts_are_counted_once(li) -> None:
    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

    index, _, chunk_of = li
    examples = _examples()
    cal_pos, held = _split()
    cal = calibrate_retriever(index, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
    capped = ConformalRetriever(cal, index=index, options=ServingOptions(max_k=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = capped.evaluate(examples)
    cuts = [w for w in caught if issubclass(w.category, GuaranteeCutWarning)]
    assert len(cuts) == 1 and "held-out sets were served without the guarantee" in str(cuts[0].message)
    assert report.mean_set_size == 1.0 and report.share_guaranteed < 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuaranteeCutWarning)
        counted = _hand_count(_li_ask(capped), held, chunk_of)
    _check_against(report, counted, cal, len(held))


def test_llamaindex_parents_are_measured_as_served(li) -> None:
    """Small-to-big: the returned units are the documents, and document-id gold is theirs."""
    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

    index, docs, _ = li
    examples = _examples()
    cal_pos, held = _split()
    cal = calibrate_retriever(index, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS, parents=docs)
    retriever = ConformalRetriever(cal, index=index, parents=docs)
    report = retriever.evaluate(examples)
    parent_of = {k: f"doc{k[0]}" for k in KEYS}
    _check_against(report, _hand_count(_li_ask(retriever), held, parent_of), cal, len(held))
    assert report.coverage > 0


# ----------------------------------------------------------------------------------------------- LangChain


@pytest.fixture(scope="module")
def lc():
    chunks, chunk_of = [], {}
    for d in range(N_DOCS):
        sents = _sentences(d)
        for i in range(0, N_SENT, 2):
            cid = f"doc{d}::chunk{i // 2}"
            chunks.append(LCDocument(" ".join(sents[i : i + 2]), id=cid, metadata={"doc_id": f"doc{d}"}))
            for s in (i, i + 1):
                chunk_of[(d, s)] = cid
    store = InMemoryVectorStore(HashEmbeddings())
    store.add_documents(chunks)
    return store, chunk_of


def _lc_ask(retriever, **kwargs):
    def ask(question: str) -> list[tuple]:
        got = retriever.invoke(question, **kwargs)
        return [(d.id, d.page_content, d.metadata.get("conformal_guaranteed")) for d in got]

    return ask


def test_langchain_evaluate_counts_the_served_sets(lc) -> None:
    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    store, chunk_of = lc
    examples = _examples()
    cal_pos, held = _split()
    cal = calibrate_retriever(store, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
    retriever = ConformalRetriever(vectorstore=store, calibration=cal)
    report = retriever.evaluate(examples)
    assert report.n_excluded == 40
    _check_against(report, _hand_count(_lc_ask(retriever), held, chunk_of), cal, len(held))
    assert report.share_guaranteed == 1.0
    by_chunk = [replace(examples[i], gold_ids=(chunk_of[KEYS[i]],)) for i in held]
    assert retriever.evaluate(by_chunk) == replace(report, n_excluded=0)


def test_langchain_k_is_served_as_set(lc) -> None:
    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    store, chunk_of = lc
    examples = _examples()
    cal_pos, held = _split()
    cal = calibrate_retriever(store, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
    capped = ConformalRetriever(vectorstore=store, calibration=cal, k=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuaranteeCutWarning)
        report = capped.evaluate(examples)
        counted = _hand_count(_lc_ask(capped), held, chunk_of)
    assert report.mean_set_size <= 1.0
    _check_against(report, counted, cal, len(held))


def test_langchain_a_bad_gold_id_is_the_one_error(lc) -> None:
    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

    store, _ = lc
    examples = _examples()
    cal_pos, held = _split()
    cal = calibrate_retriever(store, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
    bad = [replace(examples[held[0]], gold_ids=("no-such-doc",))]
    with pytest.raises(CalibrationError, match="neither as chunk ids nor as document ids"):
        ConformalRetriever(vectorstore=store, calibration=cal).evaluate(bad)


# ------------------------------------------------- an answer-set calibration: its split and pilot questions


def _answer_set_calibration(retrieval: RetrievalCalibration, used: list[int]):
    """An answer-set calibration over ``retrieval`` whose split optimisation and pilot used ``used`` (8 + 4)."""
    from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, StageProvenance

    examples = _examples()
    digests = [examples[i].digest for i in used]
    optimisation = {
        "n_optimisation": 8,
        "optimisation_question_ids": digests[:8],
        "pilot": {"n_questions": 4, "n_hits": 4, "question_ids": digests[8:]},
    }
    return AnswerSetCalibration.from_stages(
        retrieval,
        [-1.0] * retrieval.n_calibration_,
        alpha=0.4,
        n_samples=4,
        model="fake",
        clustering={"method": "exact"},
        provenance=StageProvenance(question_ids=retrieval.question_ids_, optimisation=optimisation),
    )


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_evaluate_leaves_out_an_answer_set_calibrations_split_and_pilot_questions(li, lc, framework) -> None:
    """Fails before the fix: the 12 split-choosing and pilot questions were asked as held out (issue 41, 5)."""
    examples = _examples()
    cal_pos, held = _split()
    used, rest = held[:12], held[12:]
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever

        index, _, chunk_of = li
        cal = calibrate_retriever(index, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
        answer_cal = _answer_set_calibration(cal, used)
        retriever = ConformalRetriever(answer_cal, index=index)
        ask = _li_ask(retriever)
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever

        store, chunk_of = lc
        cal = calibrate_retriever(store, [examples[i] for i in cal_pos], pool_size=20, options=OPTIONS)
        answer_cal = _answer_set_calibration(cal, used)
        retriever = ConformalRetriever(vectorstore=store, calibration=answer_cal)
        ask = _lc_ask(retriever)
    report = retriever.evaluate(examples)
    assert (report.n_questions, report.n_excluded) == (len(rest), 40 + 12)
    stage = answer_cal.retrieval_stage()
    counted = _hand_count(ask, rest, chunk_of)
    assert report.coverage == pytest.approx(counted["coverage"])
    assert report.mean_set_size == pytest.approx(counted["units"])
    assert report.verdict == calibrated_verdict(stage, report.coverage, len(rest))
    # only split and pilot questions: none held out
    with pytest.raises(CalibrationError, match="No held-out question"):
        retriever.evaluate([examples[i] for i in used])
    # a retriever given the retrieval stage alone knows nothing of the split: those 12 are held out
    plain = (
        ConformalRetriever(stage, index=li[0])
        if framework == "llamaindex"
        else ConformalRetriever(vectorstore=lc[0], calibration=stage)
    )
    assert plain.evaluate(examples).n_questions == len(held)
