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

Both generator scores run: the cluster frequency (TRAQ) and the frequency with ties broken by
Gemma's own likelihood (the replayed samples carry their mean token log-probabilities).

Negative controls run the same trials with a wrong rule and must fail the same check:

* the threshold rank without the (n+1) correction fails the retrieval claim (on these data:
  retrieval coverage 0.73 against 0.81 for the right rule, by simulation over 4,000 splits);
* a generator calibrated on another chunk than the one that defines the retrieval score (the pool
  chunk where the LLM does best) fails the generator claim with the likelihood score, while the
  right chunk passes it. This check reads the generator threshold straight off the calibration
  (40 calibration questions, every other question as test, no synthesizer call), where the
  Beta sd of the threshold is small enough to see the gap (simulated over 3,000 splits: 0.51 for
  the right chunk, 0.44 for the wrong one, target 0.5). With the frequency score it cannot be
  caught: with M = 6 the frequency ties so heavily (38% of the questions at 1/6, 31% misses) that
  the generator threshold keeps every cluster either way (0.67 against 0.64), which is exactly
  the waste the likelihood score removes.

``tests/answer_sets/test_engine_guarantee_holes.py`` checks that the generator is calibrated on the right
chunk. The size checks are ones that keeping every candidate fails, and the likelihood score must
keep fewer clusters than the frequency score on the same splits.

Why this size suffices, and what keeps it fast: the claims are about the mean over random splits
of *these* 200 questions, so the data cannot be smaller without changing what is claimed; the power
is set by ``TRIALS`` / ``CONTROL_TRIALS`` through :func:`tolerance` (kept as they are, so every
negative control still fails by the margin simulated above). The live parts (MiniLM, Chroma, Gemma
from an empty cache) are proved by ``tests/smoke/test_real_parts.py``; here the model is replayed.
ROUGE-L between the same answer strings is recomputed on every split: the library's own
``rouge_f1`` cache (65,536 pairs) is smaller than this module's working set (147,566 pairs, looked
up 6 million times), so it misses almost always. :func:`_rouge_memo` gives the module an unbounded
cache of the same pure function (bit-equal scores, so the same sets), and :func:`harnesses`
retrieves each question's pool and counts its clusters once per framework instead of once per
generator score (together about 7% of the module's time; the rest is the frameworks' query path).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets import conformalizer as calibrate_module
from conformal_rag_plugins.answer_sets.gold import GoldChunk
from conformal_rag_plugins.answer_sets.options import (
    ClusteringOptions,
    RetrievalStageOptions,
    SamplingOptions,
    SplitOptions,
)
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.core import clustering as clustering_module
from conformal_rag_plugins.core import generation_scores as generation_scores_module
from conformal_rag_plugins.core.clustering import cluster_answers, merge_clusters
from conformal_rag_plugins.core.generation_scores import answer_matches, generation_score
from conformal_rag_plugins.core.quantile import conformal_rank
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.gold_matching import gold_positions

pytestmark = pytest.mark.statistical

ALPHA, ALPHA_RET = 0.7, 0.2
ALPHA_GEN = ALPHA - ALPHA_RET
M, POOL = 6, 6
N_CAL, N_TEST = 10, 30
TRIALS = 70  # per framework and generator score, for the claims of the right rule
CONTROL_TRIALS = 150  # the negative controls need more power
SCORES = ("frequency", "likelihood")
# the wrong-chunk control checks the generator claim from the calibration alone (no synthesizer call), on
# every question outside the calibration, with a calibration large enough for its Beta sd to be small
WRONG_CHUNK_N_CAL = 40
SCORE = "similarity"  # continuous: `relative` puts ~60% of the questions on a tie at 0 (gold ranked first)
CLUSTERING = {"method": "rougeL", "tau": 0.7}
SEED = 20261123


def _beta_var(n: int, alpha: float) -> float:
    """Variance of split-conformal coverage over the calibration draw: Beta(k, n + 1 - k)."""
    k = conformal_rank(n, alpha)
    return k * (n + 1 - k) / ((n + 1) ** 2 * (n + 2))


def tolerance(alpha_stages: tuple[float, ...], target: float, trials: int, n_cal: int, n_test: int) -> float:
    """Three standard errors of the mean over ``trials`` splits (sds of the stages add up: union bound)."""
    sd = sum(math.sqrt(_beta_var(n_cal, a)) for a in alpha_stages) + math.sqrt(target * (1 - target) / n_test)
    return 3 * sd / math.sqrt(trials)


@dataclass
class Question:
    example: CalibrationExample
    gold_id: str  # the chunk that defines the retrieval score (best-ranked gold, else the first gold)
    r_gen: float  # generator score of that chunk's samples
    everything: int  # semantic clusters when every pool chunk's every answer is kept


def _clusters(row, cid: str, generator_score: str, **kw):
    return cluster_answers(
        row["samples"][cid], n_samples=M, logprobs=row["logprobs"][cid], score=generator_score, **CLUSTERING, **kw
    )


@dataclass
class Pooled:
    """What a question's pool gives, whatever the generator score: its defining chunk and its cluster count."""

    row: dict
    example: CalibrationExample
    gold_id: str
    everything: int


def _pooled(rows, pool_of) -> list[Pooled]:
    """One pool retrieval and one merge of every pool chunk's clusters per question (shared by both scores)."""
    out = []
    for row in rows:
        ex = CalibrationExample(
            row["question"], gold_ids=tuple(row["gold_ids"]), answers=tuple(row["answers"]), id=row["id"]
        )
        ids, texts = pool_of(ex.question)
        pos = gold_positions(ex, ids, texts)
        gold = ids[pos[0]] if pos else ex.gold_ids[0]
        per_chunk = {c: _clusters(row, c, "frequency", chunk_id=c) for c in ids}
        out.append(Pooled(row, ex, gold, len(merge_clusters(per_chunk))))
    return out


def _questions(pooled: list[Pooled], generator_score: str) -> list[Question]:
    return [
        Question(
            p.example,
            p.gold_id,
            generation_score(_clusters(p.row, p.gold_id, generator_score), p.example.answers),
            p.everything,
        )
        for p in pooled
    ]


def best_chunk_for_the_llm(rows, generator_score: str):
    """A wrong ``defining_gold``: the pool (or gold) chunk whose samples score best, not the retrieval-defining one."""
    by_question = {row["question"]: row for row in rows}

    def wrong(example, pool, texts):
        row = by_question[example.question]
        candidates = [c for c in pool.ids if c in row["samples"]] + [c for c in row["gold_ids"] if c in row["samples"]]
        best = min(candidates, key=lambda c: generation_score(_clusters(row, c, generator_score), example.answers))
        text = dict(zip(pool.ids, pool.texts, strict=True)).get(best) or texts([best])[best]
        return GoldChunk(best, text)

    return wrong


def check(stats: dict[str, float]) -> list[str]:
    """The claims that fail (empty when all hold within tolerance); only the claims measured are checked."""
    trials, n_cal, n_test = (int(stats[k]) for k in ("trials", "n_cal", "n_test"))
    failed = []
    for name, target, stages in (
        ("retrieval", 1 - ALPHA_RET, (ALPHA_RET,)),
        ("generator", 1 - ALPHA_GEN, (ALPHA_GEN,)),
        ("pair", 1 - ALPHA, (ALPHA_RET, ALPHA_GEN)),
        ("any", 1 - ALPHA, (ALPHA_RET, ALPHA_GEN)),
    ):
        if name not in stats:
            continue
        tol = tolerance(stages, target, trials, n_cal, n_test)
        if stats[name] < target - tol:
            failed.append(f"{name}: {stats[name]:.3f} < {target:.2f} - {tol:.3f}")
    return failed


class Harness:
    """Runs the trials through one framework's public classes."""

    def __init__(self, framework: str, host, llm, questions: list[Question], generator_score: str) -> None:
        self.framework, self.host, self.llm, self.questions = framework, host, llm, questions
        self.generator_score = generator_score
        # the library's own sample cache, one per harness: each (question, chunk) is drawn from the replay LLM
        # through the framework's sampler once, then served as the library serves a user's cached samples
        self.cache = SampleCache(":memory:")

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
            # pilot=None: each draw's coverage as calibrated on all its questions (the pilot is tested apart)
            sampling=SamplingOptions(n_samples=M, max_concurrency=1, progress=False, pilot=None, cache=self.cache),
            split=SplitOptions(alpha_retrieval=ALPHA_RET),
            clustering=ClusteringOptions(**CLUSTERING, generator_score=self.generator_score),
            retrieval=RetrievalStageOptions(score=SCORE, pool_size=POOL),
        )

    def query_sampling(self, calibration) -> SamplingOptions:
        """One call at a time (the local model is not thread-safe), with the calibrated M and the harness's cache."""
        return SamplingOptions(n_samples=calibration.n_samples_, max_concurrency=1, cache=self.cache)

    def answer(self, calibration, questions: list[str]) -> list[dict]:
        if self.framework == "llamaindex":
            from llama_index.core.query_engine import RetrieverQueryEngine

            from conformal_rag_plugins.llamaindex import ConformalAnswerSetSynthesizer, ConformalRetriever

            engine = RetrieverQueryEngine(
                retriever=ConformalRetriever(index=self.host, calibration=calibration),
                response_synthesizer=ConformalAnswerSetSynthesizer(
                    llm=self.llm, calibration=calibration, sampling=self.query_sampling(calibration)
                ),
            )
            return [dict(engine.query(q).metadata) for q in questions]
        from langchain_core.runnables import RunnablePassthrough

        from conformal_rag_plugins.langchain import ConformalAnswerSetSynthesizer, ConformalRetriever

        chain = {
            "context": ConformalRetriever(vectorstore=self.host, calibration=calibration),
            "question": RunnablePassthrough(),
        } | ConformalAnswerSetSynthesizer(
            llm=self.llm, calibration=calibration, sampling=self.query_sampling(calibration)
        )
        out = []
        for q in questions:
            result = chain.invoke(q)
            meta = result.to_dict()
            meta["answer_set"] = meta.pop("answers")
            out.append(meta)
        return out

    def retrieve(self, calibration, questions: list[str]) -> list[list[str]]:
        """The ids ``ConformalRetriever`` returns with the answer-set calibration (the answer set's retrieval set)."""
        if self.framework == "llamaindex":
            from conformal_rag_plugins.llamaindex import ConformalRetriever

            retriever = ConformalRetriever(index=self.host, calibration=calibration)
            return [[n.node.node_id for n in retriever.retrieve(q)] for q in questions]
        from conformal_rag_plugins.langchain import ConformalRetriever

        retriever = ConformalRetriever(vectorstore=self.host, calibration=calibration)
        return [[d.id for d in retriever.invoke(q)] for q in questions]

    def run(
        self,
        trials: int = TRIALS,
        *,
        n_cal: int = N_CAL,
        n_test: int = N_TEST,
        stage: str = "answers",
        seed: int = SEED,
    ) -> dict[str, float]:
        """Mean over ``trials`` random splits.

        ``stage="answers"`` asks the answer-set pipeline (every claim); ``"retrieval"`` asks only the
        ``ConformalRetriever`` (the retrieval claim); ``"generator"`` reads the generator claim off the calibration.
        """
        rng = np.random.default_rng(seed)
        acc: dict[str, list[float]] = {}
        for _ in range(trials):
            perm = rng.permutation(len(self.questions))
            cal = [self.questions[i] for i in perm[:n_cal]]
            test = [self.questions[i] for i in perm[n_cal : n_cal + n_test]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                calibration = self.calibrate([q.example for q in cal])
                if stage == "generator":
                    # a generator miss (no correct sample) is never covered, even by a +inf threshold
                    covered = [math.isfinite(q.r_gen) and q.r_gen <= calibration.generation_threshold_ for q in test]
                    acc.setdefault("generator", []).append(float(np.mean(covered)))
                    continue
                if stage == "retrieval":
                    kept = self.retrieve(calibration, [q.example.question for q in test])
                    covered = [q.gold_id in ids for q, ids in zip(test, kept, strict=True)]
                    acc.setdefault("retrieval", []).append(float(np.mean(covered)))
                    continue
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
        return {k: float(np.mean(v)) for k, v in acc.items()} | {"trials": trials, "n_cal": n_cal, "n_test": n_test}


@pytest.fixture(scope="module", autouse=True)
def _rouge_memo():
    """An unbounded cache of the library's pure ``rouge_f1`` for this module (same scores, so the same sets).

    The library bounds its cache at 65,536 pairs; the trials here revisit 147,566 pairs (6 million look-ups) in
    the same order on every split, so a bounded LRU cache misses nearly every time.
    """
    memo = functools.cache(clustering_module.rouge_f1.__wrapped__)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(clustering_module, "rouge_f1", memo)
        patch.setattr(generation_scores_module, "rouge_f1", memo)
        yield
    memo.cache_clear()


def _frozen(value):
    """A hashable, exact stand-in for a Chroma query argument (arrays by dtype, shape and bytes)."""
    if isinstance(value, list | tuple) and value and not isinstance(value[0], str | dict):
        array = np.asarray(value)  # a query embedding (or a batch of them): one bytes key, not 384 floats
        if array.dtype.kind in "fiu":
            value = array
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


@pytest.fixture(scope="module", autouse=True)
def _chroma_query_memo():
    """Replay each distinct Chroma query after its first, real run (same collection, same arguments).

    The trials ask the same 200 questions of the same two read-only collections over and over (about 12,000
    queries in each generator control alone), and Chroma's query was half of this module's time. Every
    (collection, question, ``n_results``) pair is still answered once by the real Chroma, the rest of the path
    (MiniLM query embedding, the frameworks' retrievers, the library) runs on every call, and the memo returns
    a deep copy of the real answer, so the sets and the statistics are the ones the real store gives. Nothing in
    this module writes to a collection while the memo is on (a write would make the memo stale).
    """
    import copy

    from chromadb.api.models.Collection import Collection

    real = Collection.query
    memo: dict = {}

    def query(self, *args, **kwargs):
        key = (str(self.id), _frozen(args), _frozen(kwargs))
        if key not in memo:
            memo[key] = real(self, *args, **kwargs)
        return copy.deepcopy(memo[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Collection, "query", query)
        yield memo
    memo.clear()


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

    pools = {"llamaindex": (li_index, li_replay_llm, li_pool), "langchain": (lc_store, lc_replay_llm, lc_pool)}
    out = {}
    for name, (host, llm, pool_of) in pools.items():
        pooled = _pooled(replay_rows, pool_of)
        for score in SCORES:
            out[name, score] = Harness(name, host, llm, _questions(pooled, score), score)
    return out


@pytest.fixture(scope="module")
def shipped(harnesses):
    return {key: h.run() for key, h in harnesses.items()}


@pytest.mark.parametrize("generator_score", SCORES)
@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_shipped_answer_sets_cover_end_to_end(shipped, replay_table, framework: str, generator_score: str) -> None:
    stats = shipped[framework, generator_score]
    assert replay_table.unknown == [], "a synthesizer asked for a chunk that was never sampled"
    assert check(stats) == [], stats
    assert stats["any"] >= stats["pair"]
    # with 10 calibration questions many draws hold too many misses for a flagged threshold: said, not hidden
    assert 0.3 <= stats["guaranteed"] < 1.0, stats
    # a size check that keeping every candidate (size == everything) fails; with 10 questions more than half
    # of the draws are not flagged and keep the whole pool (issue 33), hence the loose bound
    assert stats["size"] <= 0.85 * stats["everything"], stats


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_likelihood_keeps_fewer_answers_than_frequency(shipped, framework: str) -> None:
    """Same splits, same guarantee: breaking the frequency ties must shrink the sets."""
    freq, tie = shipped[framework, "frequency"], shipped[framework, "likelihood"]
    assert tie["size"] < 0.9 * freq["size"], (freq, tie)


def test_retrieval_stage_alone_is_the_answer_sets_retrieval_set(shipped, harnesses) -> None:
    """``stage="retrieval"`` (used by the control below) measures what the answer-set pipeline measures."""
    alone = harnesses["llamaindex", "frequency"].run(stage="retrieval")
    assert alone["retrieval"] == shipped["llamaindex", "frequency"]["retrieval"], alone


def test_negative_control_without_the_n_plus_one_correction(harnesses, monkeypatch) -> None:
    from conformal_rag_plugins.core import quantile

    monkeypatch.setattr(quantile, "conformal_rank", lambda n, alpha: math.ceil(n * (1 - alpha)))
    with quantile.threshold_rule(quantile.PLAIN_RANK_RULE):  # the rank as patched (the pool-miss rule would raise it)
        stats = harnesses["llamaindex", "frequency"].run(CONTROL_TRIALS, stage="retrieval")
    failed = check(stats)
    assert any(f.startswith("retrieval") for f in failed), (stats, failed)


@pytest.mark.parametrize("wrong", [False, True], ids=["defining-chunk", "another-chunk"])
def test_generator_claim_and_negative_control_calibrated_on_another_chunk(
    harnesses, replay_rows, monkeypatch, wrong: bool
) -> None:
    """The generator stage, calibrated through ``calibrate_answer_sets``, covers the retrieval-defining chunk.

    Calibrated instead on the chunk where the LLM does best (mismatched stages), the same check fails
    (on these data, by simulation over 3,000 splits: coverage 0.51 against 0.44, target 0.5).
    """
    if wrong:
        monkeypatch.setattr(calibrate_module, "defining_gold", best_chunk_for_the_llm(replay_rows, "likelihood"))
    harness = harnesses["llamaindex", "likelihood"]
    n_test = len(harness.questions) - WRONG_CHUNK_N_CAL
    stats = harness.run(CONTROL_TRIALS, n_cal=WRONG_CHUNK_N_CAL, n_test=n_test, stage="generator")
    failed = check(stats)
    if wrong:
        assert any(f.startswith("generator") for f in failed), (stats, failed)
    else:
        assert failed == [], stats
