"""The guarantee holes of issue 9, each with a test that failed before the fix.

A small world drives ``AnswerSetConformalizer`` (the body of both frameworks' ``calibrate_answer_sets``)
as a fake ``AnswerSetHost``: every question has a pool, a gold chunk, and a sampler whose answers
depend on the chunk it is given. Nothing here is statistical; the statistical checks are in
``tests/answer_sets/test_conformalizer_shipped.py`` and ``tests/core/test_combination.py``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, min_answer_set_questions
from conformal_rag_plugins.answer_sets.conformalizer import AnswerSetConformalizer
from conformal_rag_plugins.answer_sets.engine import (
    ChunkInput,
    abuild_answer_set,
    chunks_from_metadata,
    coverage_report,
)
from conformal_rag_plugins.answer_sets.options import (
    ClusteringOptions,
    RetrievalStageOptions,
    SamplingOptions,
    SplitOptions,
)
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.combination import harmonic_mean_rule
from conformal_rag_plugins.core.errors import (
    CalibrationError,
    CalibrationIntegrityError,
    ConformalError,
    CoverageCeilingWarning,
    InfiniteThresholdWarning,
)
from conformal_rag_plugins.core.quantile import coverage_bounds, flagged_min_calibration_size, flagged_rank
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, collect_observations
from conformal_rag_plugins.runtime.run_sync import run_sync

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
M = 4


class World:
    """``n`` questions; question i's gold chunk is ``g{i}`` (text ``gold i``), answered ``ans{i}``."""

    def __init__(self, n: int = 60, *, miss_every: int = 0, wrong_every: int = 0) -> None:
        self.examples = [
            CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=(f"ans{i}",), id=f"q{i}")
            for i in range(n)
        ]
        self.miss_every, self.wrong_every = miss_every, wrong_every
        self.texts = {f"g{i}": f"gold {i}" for i in range(n)} | {f"d{j}": f"distractor {j}" for j in range(5)}
        self.pools: dict[str, CandidatePool] = {}
        self.calls: list[tuple[str, str]] = []
        for i, ex in enumerate(self.examples):
            self.pools[ex.question] = self._pool(i)

    def _pool(self, i: int) -> CandidatePool:
        miss = self.miss_every and i % self.miss_every == 0
        ids = [f"d{j}" for j in range(3)] + ([] if miss else [f"g{i}"])
        scores = [0.9 - 0.1 * j for j in range(3)] + ([] if miss else [0.95 - 0.001 * (i % 7)])
        return CandidatePool.from_unsorted(ids, [self.texts[c] for c in ids], scores)

    def fetch(self, question: str) -> CandidatePool:
        return self.pools[question]

    async def sample(self, question: str, context: str) -> list[Sample]:
        self.calls.append((question, context))
        i = int(question.split()[1].rstrip("?"))
        if context == f"gold {i}" and not (self.wrong_every and i % self.wrong_every == 0):
            got = [f"ans{i}"] * (2 + i % 3) + ["noise"] * (M - 2 - i % 3)
        else:
            got = ["noise", "other", "noise", "I don't know"]
        return [Sample(t) for t in got]

    def calibrate_retrieval(self, examples, *, confidence_level=0.9, score="relative", progress=False) -> object:
        obs = collect_observations(examples, self.fetch, progress=False)
        return calibrate_from_pools(
            obs,
            fingerprint=FP,
            pool_size=4,
            options=RetrievalOptions(confidence_level=0.9, score="relative"),
        )

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        return {i: self.texts[i] for i in ids if i in self.texts}

    def sampler(self, options: SamplingOptions) -> World:
        return self  # asample, identity, model_label

    async def asample(self, question: str, context: str) -> list[Sample]:
        return await self.sample(question, context)

    def identity(self) -> None:
        return None  # not described: nothing recorded

    def model_label(self) -> str:
        return "fake"

    def embedding(self, embedder: object) -> None:
        return None


def _calibrate(
    world: World,
    examples=None,
    *,
    quiet: bool = True,
    confidence_level: float = 0.6,
    retrieval_calibration=None,
    optimise_split: bool = False,
    generator_score: str | None = None,
    **split,
) -> AnswerSetCalibration:
    conformalizer = AnswerSetConformalizer(
        confidence_level,
        # pilot=None: the guarantee holes of the calibration itself, on every example
        sampling=SamplingOptions(n_samples=M, progress=False, pilot=None),
        split=SplitOptions(optimise=optimise_split, bo_calls=4, **split),
        clustering=ClusteringOptions(method="exact", tau=None, generator_score=generator_score),
        retrieval=RetrievalStageOptions(calibration=retrieval_calibration),
    )
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return conformalizer.conformalize(world, world.examples if examples is None else examples)


# ----------------------------------------------------------------------------- HMP with misses


@pytest.mark.parametrize("w", [0.2, 0.5, 0.8])
def test_hmp_guaranteed_iff_missed_stage_rejected_matches_the_algebra(w: float) -> None:
    alpha, n = 0.1, 500
    for m in range(0, 60, 3):
        ret = [0.0] * (n - m) + [math.inf] * m
        rule = harmonic_mean_rule(ret, [0.0] * n, alpha, w_ret=w)
        bound = w * alpha / (2 - (1 - w) * alpha)
        assert rule.guaranteed == ((1 + m) / (n + 1) <= bound), (m, rule.miss_pvalues)
        gen = [0.0] * (n - m) + [math.inf] * m
        rule = harmonic_mean_rule([0.0] * n, gen, alpha, w_ret=w)
        assert rule.guaranteed == ((1 + m) / (n + 1) <= (1 - w) * alpha / (2 - w * alpha))


def test_hmp_with_many_misses_is_flagged_and_would_undercover() -> None:
    """9% retrieval misses at alpha=0.1, w=0.5, n=500: the rule accepts missed pairs, so it is flagged."""
    rng = np.random.default_rng(3)
    n, alpha = 500, 0.1
    covered, flags = [], []
    for _ in range(200):
        r_ret = rng.normal(size=2 * n)
        r_ret[rng.random(2 * n) < 0.09] = math.inf
        r_gen = rng.normal(size=2 * n)
        rule = harmonic_mean_rule(r_ret[:n], r_gen[:n], alpha)
        flags.append(rule.guaranteed)
        keep = rule.include(r_ret[n:], r_gen[n:]) & np.isfinite(r_ret[n:])  # a miss is never in the pool
        covered.append(keep.mean())
    assert not any(flags)
    assert np.mean(covered) < 1 - alpha - 0.005  # the shortfall the flag reports
    assert "harmonic-mean rule would accept a missed retrieval" in rule.reason


def test_hmp_answer_set_calibration_reports_the_miss_condition() -> None:
    world = World(60, miss_every=4)  # 25% retrieval misses
    cal = _calibrate(world, method="hmp", confidence_level=0.7)
    assert cal.retrieval_.n_misses_ == 15
    assert not cal.guaranteed_, "before the fix guaranteed_ was coverage_ceiling_ > 0"
    assert "missed retrieval" in cal.reason_
    # the same data at a level the misses allow is guaranteed by the rule (World records no generator, so the
    # calibration itself says False: test_calibration_generator_record.py)
    allowed = _calibrate(World(60, miss_every=20), method="hmp", confidence_level=0.5)
    assert allowed.rule().guaranteed and allowed.rule_reason_ == ""


def test_unreachable_target_warns_naming_the_ceiling() -> None:
    world = World(40, wrong_every=2)  # the generator is right on half of the questions
    with pytest.warns(CoverageCeilingWarning, match="coverage ceiling 0.50"):
        _calibrate(world, confidence_level=0.7, quiet=False)


# ----------------------------------------------------------------------------- same pair in both stages


def test_generator_is_calibrated_on_the_best_ranked_gold_chunk() -> None:
    world = World(30)
    # question 0 has two gold chunks; the pool ranks the second one first and only it yields the answer
    ex0 = replace(world.examples[0], gold_ids=("other-gold", "g0"))
    world.examples[0] = ex0
    world.texts["other-gold"] = "another passage"
    world.pools[ex0.question] = CandidatePool.from_unsorted(
        ["g0", "d0", "other-gold"], ["gold 0", "distractor 0", "another passage"], [0.99, 0.5, 0.4]
    )
    cal = _calibrate(world)
    assert math.isfinite(cal.generation_scores_[0]), "before the fix the first gold ('other-gold') was sampled"
    assert ("question 0?", "another passage") not in world.calls


def test_a_missed_question_uses_its_first_gold_chunk() -> None:
    world = World(30, miss_every=10)
    cal = _calibrate(world)
    assert math.isinf(cal.retrieval_.scores_[0])
    assert ("question 0?", "gold 0") in world.calls


def test_both_stages_use_the_same_questions_including_unanswerable_ones() -> None:
    world = World(40)
    world.examples[1] = replace(world.examples[1], answers=(), is_impossible=True)
    cal = _calibrate(world)
    assert len(cal.generation_scores_) == len(cal.retrieval_.scores_) == 40, "before: 39 generator scores"
    assert cal.question_ids_ == cal.retrieval_.question_ids_
    assert cal.question_ids_[1] == world.examples[1].digest


def test_a_retrieval_calibration_on_a_superset_is_restricted_to_the_shared_questions() -> None:
    world = World(60)
    retrieval = world.calibrate_retrieval(world.examples)
    cal = _calibrate(world, examples=world.examples[:40], retrieval_calibration=retrieval)
    assert cal.retrieval_.n_calibration_ == len(cal.generation_scores_) == 40
    assert cal.retrieval_.question_ids_ == tuple(ex.digest for ex in world.examples[:40])
    other = World(60)
    other.examples = [replace(ex, question="other " + ex.question) for ex in other.examples]
    with pytest.raises(CalibrationError, match="same questions"):
        _calibrate(world, examples=other.examples, retrieval_calibration=retrieval)


def test_mismatched_stage_lengths_are_refused() -> None:
    world = World(30)
    cal = _calibrate(world)
    with pytest.raises(CalibrationError, match="same questions"):
        AnswerSetCalibration.from_stages(
            cal.retrieval_, cal.generation_scores_[:-1], alpha=0.4, n_samples=M, model="x", clustering={}
        )


# ----------------------------------------------------------------------------- BO split disjointness


def test_bo_refuses_a_retrieval_calibration_that_used_the_optimisation_questions() -> None:
    world = World(60)
    retrieval = world.calibrate_retrieval(world.examples)  # all 60, including the future optimisation split
    with pytest.raises(CalibrationError, match="optimisation questions were used to calibrate"):
        _calibrate(world, retrieval_calibration=retrieval, optimise_split=True)


def test_bo_accepts_a_disjoint_retrieval_calibration_and_samples_retrieval_sets() -> None:
    from conformal_rag_plugins.datasets.examples import split_examples

    world = World(80)
    opt, rest = split_examples(world.examples, (0.3, 0.7), seed=0)
    retrieval = world.calibrate_retrieval(rest)
    cal = _calibrate(world, retrieval_calibration=retrieval, optimise_split=True)
    assert cal.optimisation_["n_optimisation"] == len(opt)
    assert cal.optimisation_["chunks_sampled"] >= len(opt)  # gold chunks plus lazily sampled retrieval sets
    assert set(cal.question_ids_) == {ex.digest for ex in rest}
    sampled = {q for q, _ in world.calls}
    assert {ex.question for ex in opt} <= sampled


# ----------------------------------------------------------------------------- query time


def _toy() -> AnswerSetCalibration:
    world = World(60)
    return _calibrate(world)


def test_query_time_equivalence_must_match_the_calibration() -> None:
    from dataclasses import replace

    from conformal_rag_plugins.answer_sets.identity import generator_record

    record = generator_record({"llm": {"class": "Fake"}, "sampling": {}})
    cal = replace(_toy(), generator_=record)  # a checked generator, so that only the equivalence decides
    chunks = [ChunkInput("g1", "gold 1", 0.0)]
    world = World(2)
    with pytest.raises(CalibrationError, match="differs from the calibrated clustering"):
        run_sync(abuild_answer_set(cal, "question 1?", chunks, world.sample, equivalence="rougeL"))
    with pytest.raises(CalibrationError, match="differs from the calibrated clustering"):
        run_sync(abuild_answer_set(cal, "question 1?", chunks, world.sample, equivalence=lambda a, b: a == b))
    ok = run_sync(abuild_answer_set(cal, "question 1?", chunks, world.sample, equivalence="exact", generator=record))
    assert ok.guaranteed


def test_cut_or_foreign_nodes_are_not_guaranteed_or_refused() -> None:
    cal = _toy()
    meta = {
        "conformal_nonconformity": 0.0,
        "conformal_score_family": "relative",
        "conformal_threshold": cal.retrieval_threshold_,
        "conformal_guaranteed": True,
    }
    chunks, reason = chunks_from_metadata([("g1", "gold 1", meta)], cal)
    assert chunks[0].guaranteed and not reason
    cut = meta | {"conformal_guaranteed": False, "conformal_set_size": 3}  # max_k=2 cut a conformal set of 3
    chunks, reason = chunks_from_metadata([("g1", "gold 1", meta), ("d0", "distractor 0", cut)], cal)
    world = World(2)
    result = run_sync(abuild_answer_set(cal, "question 1?", chunks, world.sample, cut_reason=reason))
    assert not result.guaranteed and "max_k" in result.reason
    tighter = meta | {"conformal_threshold": cal.retrieval_threshold_ - 0.5}
    assert not chunks_from_metadata([("g1", "gold 1", tighter)], cal)[0][0].guaranteed
    with pytest.raises(ConformalError, match="no conformal metadata"):
        chunks_from_metadata([("g1", "gold 1", {"score": 0.3})], cal)
    with pytest.raises(ConformalError, match="family"):
        chunks_from_metadata([("g1", "gold 1", meta | {"conformal_score_family": "rank"})], cal)


# ----------------------------------------------------------------------------- messages


def test_reachable_follows_the_finite_threshold_not_the_ceiling() -> None:
    scores = [-1.0] * 18 + [math.inf] * 2  # ceiling 0.90 >= 0.90, but 2 misses > n - ceil(21 * 0.9) = 1
    line = coverage_report(scores, 0.1)
    assert "ceiling 0.90" in line and "UNREACHABLE" in line
    # ceiling 0.95 >= 0.90, but a flagged threshold at n = 20 allows no miss (flagged_rank(20, 0.1).max_misses == 0)
    assert "UNREACHABLE" in coverage_report([-1.0] * 19 + [math.inf], 0.1)
    assert "reachable" in coverage_report([-1.0] * 38 + [math.inf] * 2, 0.1)  # n = 40 allows 2


def test_coverage_report_states_the_flag_rule_it_follows() -> None:
    """Issue 41, 5: the docstring stated the plain condition (at most n - ceil((n+1)(1-alpha)) misses)."""
    doc = coverage_report.__doc__ or ""
    assert "flagged_rank" in doc and "max_misses" in doc
    assert "n - ceil((n+1)(1-alpha))" not in doc
    # and what it states is what it does: reachable iff flagged_rank gives a rank and the misses are within its cap
    for n in (5, 12, 17, 18, 20, 40, 60):
        for misses in range(0, 6):
            rank = flagged_rank(n, 0.1)
            stated = rank is not None and misses <= rank.max_misses
            line = coverage_report([-1.0] * (n - misses) + [math.inf] * misses, 0.1)
            assert ("UNREACHABLE" not in line) is stated, (n, misses, line)


def test_coverage_bounds_do_not_claim_full_coverage_for_an_infinite_threshold() -> None:
    assert coverage_bounds(5, 0.1) == (0.0, 1.0)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"confidence_level": 1.5}, "strictly between 0 and 1"),
        ({"confidence_level": 0.0}, "strictly between 0 and 1"),
        ({"alpha_retrieval": 0.4}, "alpha_retrieval must lie strictly between 0 and alpha"),
        ({"alpha_retrieval": 0.5}, "alpha_retrieval must lie strictly between 0 and alpha"),
        ({"method": "bogus"}, "method must be one of"),
        ({"method": "pac"}, "needs delta"),
        ({"method": "hmp", "hmp_weight": 1.2}, "hmp_weight"),
        ({"confidence_level": 0.97}, "too few for bonferroni"),
        ({"method": "hmp", "confidence_level": 0.9}, "too few for hmp"),
    ],
)
def test_bad_requests_fail_before_any_llm_call(kw, match) -> None:
    world = World(30)
    with pytest.raises(ConformalError, match=match):
        _calibrate(world, **kw)
    assert world.calls == []


def test_min_answer_set_questions() -> None:
    # each stage at 0.05 needs a flagged rank: 38 questions (the plain rank ceil(20 * 0.95) = 19 needed 19)
    assert min_answer_set_questions(0.1) == flagged_min_calibration_size(0.05) == 38
    # 98: the plain rank when nothing misses lets the rule hold one size earlier than one rank for all (99)
    assert min_answer_set_questions(0.1, alpha_retrieval=0.02) == flagged_min_calibration_size(0.02) == 98
    n = min_answer_set_questions(0.1, method="hmp", hmp_weight=0.3)
    assert harmonic_mean_rule([0.0] * n, [0.0] * n, 0.1, w_ret=0.3).guaranteed
    assert not harmonic_mean_rule([0.0] * (n - 1), [0.0] * (n - 1), 0.1, w_ret=0.3).guaranteed


def test_a_loaded_calibration_whose_fields_disagree_is_refused(tmp_path) -> None:
    from conformal_rag_plugins.storage.jsonio import with_checksum

    cal = _toy()
    data = cal.to_dict()
    assert AnswerSetCalibration.from_dict(data).generation_threshold_ == cal.generation_threshold_
    tampered = {k: v for k, v in data.items() if k != "checksum"}
    tampered["generation_threshold"] = -0.9
    with pytest.raises(CalibrationIntegrityError, match="generation_threshold"):
        AnswerSetCalibration.from_dict(with_checksum(tampered))
    tampered = {k: v for k, v in data.items() if k != "checksum"} | {"question_ids": ["x"] * 3}
    with pytest.raises(ConformalError, match="question ids"):
        AnswerSetCalibration.from_dict(with_checksum(tampered))
    tampered = {k: v for k, v in data.items() if k != "checksum"} | {"alpha_retrieval": 0.7}
    with pytest.raises(ConformalError):
        AnswerSetCalibration.from_dict(with_checksum(tampered))
