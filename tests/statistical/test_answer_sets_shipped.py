"""The answer-set guarantee on the path a user runs, on real local-model samples.

Each trial draws ``N_CAL`` calibration questions at random from the 200 cached ones, runs
``calibrate_answer_sets`` on the real dense MiniLM + Chroma host of each framework, puts the
calibration into ``ConformalRetriever`` + ``ConformalAnswerSetSynthesizer`` (a LlamaIndex
``RetrieverQueryEngine``; a LangChain LCEL chain) and asks ``N_TEST`` other questions. The LLM
is a replay of real Gemma 3 270M samples (see ``conftest.py``); nothing else is stubbed.

Why the mean over trials must reach the bound: conditional on the 200 questions, a random
split makes a test question and the calibration questions a uniformly random subset of them,
so every split-conformal claim holds *exactly in expectation over the splits*, for this data
set. The only noise is Monte Carlo over ``TRIALS`` splits; its tolerance is three standard
errors, with the per-split variance bounded by the beta variance of split-conformal coverage
(calibration draw) plus the binomial variance of the ``N_TEST`` test questions.

Claims checked (Bonferroni, alpha = 0.7 = 0.2 retrieval + 0.5 generation, `similarity` score,
calibrated on 10 questions per trial; Gemma's generator coverage ceiling is about 0.7, so
1 - alpha_gen = 0.5 is reachable, and the small calibration makes the (n+1) correction large
enough for the negative control to show):

* retrieval stage: the chunk that defines the retrieval score is in the answer set's retrieval
  set with probability >= 1 - alpha_ret;
* generator stage: the correct cluster of that chunk passes the generator threshold with
  probability >= 1 - alpha_gen;
* end to end: an answer supported by that chunk and matching a reference is in the set with
  probability >= 1 - alpha (the union bound), and so is some correct answer.

A negative control runs the same trials with the threshold rank without the (n+1) correction and
must fail the same check (on these data: retrieval coverage 0.73 against 0.81 for the right rule,
by simulation over 4,000 splits). A generator calibrated on another chunk than the one that defines
the retrieval score (the pool chunk where the LLM does best) cannot be caught here: with M = 6 the
frequency score ties so heavily (38% of the questions at 1/6, 31% misses) that the generator threshold
keeps every cluster either way (coverage 0.63 against 0.67, target 0.5); the tie-breaking score of
issue 9 part 4 is what would make that stage sharp. ``tests/answer_sets/test_guarantee_holes.py``
checks that the generator is calibrated on the right chunk. A size check is one that keeping every
candidate fails.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

from conformal_rag_plugins.calibration.examples import CalibrationExample
from conformal_rag_plugins.calibration.matching import gold_positions
from conformal_rag_plugins.core.clustering import cluster_answers, merge_clusters
from conformal_rag_plugins.core.generation_scores import answer_matches, generation_score
from conformal_rag_plugins.core.quantile import conformal_rank

pytestmark = pytest.mark.statistical

ALPHA, ALPHA_RET = 0.7, 0.2
ALPHA_GEN = ALPHA - ALPHA_RET
M, POOL = 6, 6
N_CAL, N_TEST = 10, 30
TRIALS = {"llamaindex": 150, "langchain": 80}  # the LlamaIndex count gives the negative control its power
SCORE = "similarity"  # continuous: `relative` puts ~60% of the questions on a tie at 0 (gold ranked first)
CLUSTERING = {"method": "rougeL", "tau": 0.7}
SEED = 20261123


def _beta_var(n: int, alpha: float) -> float:
    """Variance of split-conformal coverage over the calibration draw: Beta(k, n + 1 - k)."""
    k = conformal_rank(n, alpha)
    return k * (n + 1 - k) / ((n + 1) ** 2 * (n + 2))


def tolerance(alpha_stages: tuple[float, ...], target: float, trials: int) -> float:
    """Three standard errors of the mean over ``trials`` splits (sds of the stages add up: union bound)."""
    sd = sum(math.sqrt(_beta_var(N_CAL, a)) for a in alpha_stages) + math.sqrt(target * (1 - target) / N_TEST)
    return 3 * sd / math.sqrt(trials)


@dataclass
class Question:
    example: CalibrationExample
    gold_id: str  # the chunk that defines the retrieval score (best-ranked gold, else the first gold)
    r_gen: float  # generator score of that chunk's samples
    everything: int  # semantic clusters when every pool chunk's every answer is kept


def _questions(rows, pool_of) -> list[Question]:
    out = []
    for row in rows:
        ex = CalibrationExample(
            row["question"], gold_ids=tuple(row["gold_ids"]), answers=tuple(row["answers"]), id=row["id"]
        )
        ids, texts = pool_of(ex.question)
        pos = gold_positions(ex, ids, texts)
        gold = ids[pos[0]] if pos else ex.gold_ids[0]
        clusters = cluster_answers(row["samples"][gold], n_samples=M, **CLUSTERING)
        per_chunk = {c: cluster_answers(row["samples"][c], n_samples=M, chunk_id=c, **CLUSTERING) for c in ids}
        out.append(Question(ex, gold, generation_score(clusters, ex.answers), len(merge_clusters(per_chunk))))
    return out


def check(stats: dict[str, float]) -> list[str]:
    """The claims that fail (empty when all hold within tolerance)."""
    trials = int(stats["trials"])
    failed = []
    for name, target, stages in (
        ("retrieval", 1 - ALPHA_RET, (ALPHA_RET,)),
        ("generator", 1 - ALPHA_GEN, (ALPHA_GEN,)),
        ("pair", 1 - ALPHA, (ALPHA_RET, ALPHA_GEN)),
        ("any", 1 - ALPHA, (ALPHA_RET, ALPHA_GEN)),
    ):
        tol = tolerance(stages, target, trials)
        if stats[name] < target - tol:
            failed.append(f"{name}: {stats[name]:.3f} < {target:.2f} - {tol:.3f}")
    return failed


class Harness:
    """Runs the trials through one framework's public classes."""

    def __init__(self, framework: str, host, llm, questions: list[Question]) -> None:
        self.framework, self.host, self.llm, self.questions = framework, host, llm, questions

    def calibrate(self, examples):
        if self.framework == "llamaindex":
            from conformal_rag_plugins.llamaindex import calibrate_answer_sets
        else:
            from conformal_rag_plugins.langchain import calibrate_answer_sets
        return calibrate_answer_sets(
            self.host,
            self.llm,
            examples,
            confidence_level=1 - ALPHA,
            alpha_retrieval=ALPHA_RET,
            n_samples=M,
            pool_size=POOL,
            score=SCORE,
            clustering=CLUSTERING,
            max_concurrency=1,
            progress=False,
        )

    def answer(self, calibration, questions: list[str]) -> list[dict]:
        if self.framework == "llamaindex":
            from llama_index.core.query_engine import RetrieverQueryEngine

            from conformal_rag_plugins.llamaindex import ConformalAnswerSetSynthesizer, ConformalRetriever

            engine = RetrieverQueryEngine(
                retriever=ConformalRetriever(index=self.host, calibration=calibration),
                response_synthesizer=ConformalAnswerSetSynthesizer(
                    llm=self.llm, calibration=calibration, max_concurrency=1
                ),
            )
            return [dict(engine.query(q).metadata) for q in questions]
        from langchain_core.runnables import RunnablePassthrough

        from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer, ConformalRetriever

        chain = {
            "context": ConformalRetriever(vectorstore=self.host, calibration=calibration),
            "question": RunnablePassthrough(),
        } | ConformalAnswerSetSynthesizer(llm=self.llm, calibration=calibration, max_concurrency=1)
        out = []
        for q in questions:
            result = chain.invoke(q)
            meta = result.to_dict()
            meta["answer_set"] = meta.pop("answers")
            out.append(meta)
        return out

    def run(self, seed: int = SEED) -> dict[str, float]:
        trials = TRIALS[self.framework]
        rng = np.random.default_rng(seed)
        acc: dict[str, list[float]] = {}
        for _ in range(trials):
            perm = rng.permutation(len(self.questions))
            cal = [self.questions[i] for i in perm[:N_CAL]]
            test = [self.questions[i] for i in perm[N_CAL : N_CAL + N_TEST]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                calibration = self.calibrate([q.example for q in cal])
                metas = self.answer(calibration, [q.example.question for q in test])
            rows = {"retrieval": [], "generator": [], "pair": [], "any": [], "size": [], "everything": []}
            for q, meta in zip(test, metas, strict=True):
                answers = [a for a in meta["answer_set"] if not a["abstention"]]
                correct = [a for a in answers if answer_matches(a["text"], q.example.answers)]
                rows["retrieval"].append(q.gold_id in meta["retrieval_set"])
                # a generator miss (no correct sample) is never covered, even by a +inf threshold
                rows["generator"].append(math.isfinite(q.r_gen) and q.r_gen <= calibration.generation_threshold_)
                rows["pair"].append(any(q.gold_id in a["chunk_ids"] for a in correct))
                rows["any"].append(bool(correct))
                rows["size"].append(len(meta["answer_set"]))
                rows["everything"].append(q.everything)
            for k, v in rows.items():
                acc.setdefault(k, []).append(float(np.mean(v)))
            acc.setdefault("guaranteed", []).append(float(calibration.guaranteed_))
        return {k: float(np.mean(v)) for k, v in acc.items()} | {"trials": trials}


@pytest.fixture(scope="module")
def harnesses(li_index, lc_store, replay_rows, li_replay_llm, lc_replay_llm):
    from conformal_rag_plugins.langchain.host import fetch_pool

    li_retriever = li_index.as_retriever(similarity_top_k=POOL)

    def li_pool(q):
        nodes = li_retriever.retrieve(q)
        return [n.node.node_id for n in nodes], [n.node.get_content() for n in nodes]

    def lc_pool(q):
        pool, _ = fetch_pool(lc_store, q, POOL)
        return list(pool.ids), list(pool.texts)

    return {
        "llamaindex": Harness("llamaindex", li_index, li_replay_llm, _questions(replay_rows, li_pool)),
        "langchain": Harness("langchain", lc_store, lc_replay_llm, _questions(replay_rows, lc_pool)),
    }


@pytest.fixture(scope="module")
def shipped(harnesses):
    return {name: h.run() for name, h in harnesses.items()}


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_shipped_answer_sets_cover_end_to_end(shipped, replay_table, framework: str) -> None:
    stats = shipped[framework]
    assert replay_table.unknown == [], "a synthesizer asked for a chunk that was never sampled"
    assert check(stats) == [], stats
    assert stats["any"] >= stats["pair"]
    # with 15 calibration questions some draws hold too many misses for a finite threshold: flagged, not hidden
    assert 0.5 <= stats["guaranteed"] < 1.0, stats
    # a size check that keeping every candidate (size == everything) fails
    assert stats["size"] <= 0.75 * stats["everything"], stats


def test_negative_control_without_the_n_plus_one_correction(harnesses, monkeypatch) -> None:
    from conformal_rag_plugins.core import quantile

    monkeypatch.setattr(quantile, "conformal_rank", lambda n, alpha: math.ceil(n * (1 - alpha)))
    stats = harnesses["llamaindex"].run()
    failed = check(stats)
    assert any(f.startswith("retrieval") for f in failed), (stats, failed)
