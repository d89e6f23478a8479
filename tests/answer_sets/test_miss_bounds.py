"""Issue 41, section 4: a weak generator's stage bound, fixed without the calibration questions.

With a coverage ceiling of about 0.46 (the bundled 270M model) the generator stage misses more than
the default bound ``alpha_gen / 2`` and every level kept ``+inf``. A bound chosen on held-out questions
(``SplitOptions(generator_miss_bound="held-out")`` with ``optimise=True``) or given by the user makes
the threshold finite; it is recorded in the saved file. Exact ranks come from ``core.quantile``.
Before this change ``SplitOptions`` had no bound and the ``+inf`` below was the only answer.
"""

from __future__ import annotations

import json
import logging
import math
import warnings

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration, StageProvenance
from conformal_rag_plugins.answer_sets.conformalizer import AnswerSetConformalizer
from conformal_rag_plugins.answer_sets.engine import chunks_from_metadata
from conformal_rag_plugins.answer_sets.miss_bounds import feasible_retrieval_share, held_out_bound, resolve_bounds
from conformal_rag_plugins.answer_sets.options import ClusteringOptions, SamplingOptions, SplitOptions
from conformal_rag_plugins.answer_sets.reach import generator_need
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.binomial import clopper_pearson_upper
from conformal_rag_plugins.core.errors import CalibrationError, CalibrationIntegrityError, CoverageCeilingWarning
from conformal_rag_plugins.core.quantile import THRESHOLD_RULE, conformal_quantile, flagged_rank, pac_quantile
from conformal_rag_plugins.datasets.examples import CalibrationExample, split_examples
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool
from conformal_rag_plugins.storage.jsonio import with_checksum

FP = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
M = 4
N = 195
INF = float("inf")


def _weak_scores(n: int = N, ceiling: float = 0.46, seed: int = 0) -> tuple[float, ...]:
    """Generator scores: ``-confidence`` on a share ``ceiling`` of the questions, ``+inf`` (no correct answer) else."""
    rng = np.random.default_rng(seed)
    hits = rng.random(n) < ceiling
    return tuple(float(-c) if h else INF for h, c in zip(hits, rng.uniform(0.25, 1.0, n), strict=True))


def _retrieval(n: int = N) -> RetrievalCalibration:
    ranks = tuple(float(1 + i % 3) for i in range(n))  # never a miss: gold always in the top 3
    return RetrievalCalibration(conformal_quantile(ranks, 0.05), 0.05, "split", "rank", 10, n, 0, ranks, FP)


RECORD = {"llm": {"class": "Fake", "name": "fake"}, "sampling": {"n_samples": M}}  # a generator the queries check


def _combined(split: SplitOptions, gen: tuple[float, ...] | None = None, alpha: float = 0.75) -> AnswerSetCalibration:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AnswerSetCalibration.from_stages(
            _retrieval(), gen or _weak_scores(), alpha=alpha, split=split, n_samples=M, model="fake",
            clustering={"method": "exact"}, provenance=StageProvenance(generator=RECORD),
        )  # fmt: skip


def test_the_reviews_example_rank_through_the_library() -> None:
    # n = 195, alpha_gen = 0.7, bound 0.6: the rank and the misses it may have come from flagged_rank
    rank = flagged_rank(N, 0.7, 0.6)
    assert rank is not None and rank.max_misses >= N * 0.6  # room for a 0.54 miss rate
    gen = _weak_scores()
    assert 0.4 < sum(map(math.isfinite, gen)) / N < 0.5  # a 0.46 ceiling
    bounded = _combined(SplitOptions(alpha_retrieval=0.05, generator_miss_bound=0.6), gen)
    assert bounded.miss_bound_generation_ == 0.6 and bounded.alpha_generation_ == pytest.approx(0.7)
    assert bounded.generation_threshold_ == sorted(gen)[rank.rank - 1]
    assert bounded.guaranteed_ and bounded.reason_ == ""
    # the default bound alpha_gen / 2 = 0.35 is below the 0.54 miss rate: +inf, as before this change
    default = _combined(SplitOptions(alpha_retrieval=0.05), gen)
    assert default.miss_bound_generation_ is None and math.isinf(default.generation_threshold_)
    assert not default.guaranteed_ and "generator threshold is +inf" in default.reason_


def test_the_bound_is_saved_checked_and_old_files_read_as_before(tmp_path) -> None:
    cal = _combined(SplitOptions(alpha_retrieval=0.05, generator_miss_bound=0.6))
    data = cal.to_dict()
    assert data["miss_bound_generation"] == 0.6 and "miss_bound_retrieval" not in data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no generator record: UncheckedGeneratorWarning
        again = AnswerSetCalibration.from_dict(json.loads(json.dumps(data)))
    assert again.miss_bounds_ == (None, 0.6) and again.generation_threshold_ == cal.generation_threshold_
    # a file without bounds carries no bound field at all: older readers load it unchanged
    assert "miss_bound_generation" not in _combined(SplitOptions(alpha_retrieval=0.05)).to_dict()
    edited = {k: v for k, v in data.items() if k != "checksum"}
    for bad, match in ((0.3, "disagrees"), (0.7, "miss_bound_generation"), ("0.6", "miss_bound_generation")):
        with pytest.raises(CalibrationIntegrityError, match=match), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            AnswerSetCalibration.from_dict(with_checksum({**edited, "miss_bound_generation": bad}))


def test_bad_bounds_are_refused_before_any_llm_call() -> None:
    for bad in (1.0, -0.1, "half", True):
        with pytest.raises(CalibrationError, match="generator_miss_bound must be"):
            SplitOptions(generator_miss_bound=bad)
    with pytest.raises(CalibrationError, match="miss_bound_confidence"):
        SplitOptions(miss_bound_confidence=1.0)
    world = _World(40, ceiling=0.46)
    for split, match in (
        (SplitOptions(generator_miss_bound="held-out"), "optimise=True"),
        (SplitOptions(method="hmp", generator_miss_bound=0.1), "harmonic-mean rule has none"),
        (SplitOptions(alpha_retrieval=0.05, generator_miss_bound=0.7), "must lie below that stage's alpha 0.7"),
        (SplitOptions(optimise=True, generator_miss_bound=0.75), "leave no split of alpha = 0.75"),
    ):
        with pytest.raises(CalibrationError, match=match):
            _conformalizer(0.25, split).conformalize(world.host(), world.examples)
    assert world.calls == 0


def test_resolve_and_feasible_splits() -> None:
    gen = [-0.5] * 28 + [INF] * 32
    ret = [1.0] * 60
    b_ret, b_gen = resolve_bounds((0, "held-out"), (ret, gen), 0.95)
    assert b_ret == 0.0 and b_gen == held_out_bound(32, 60, 0.95) == clopper_pearson_upper(32, 60, 0.95)
    assert feasible_retrieval_share(0.7, (b_ret, b_gen)) == pytest.approx((0.0, 0.7 - b_gen))
    assert feasible_retrieval_share(0.4, (None, b_gen)) is None  # 0.4 cannot hold a 0.64 bound


def test_the_true_reason_when_the_retrievers_threshold_is_infinite() -> None:
    cal = _combined(SplitOptions(alpha_retrieval=0.05, generator_miss_bound=0.6))
    meta = {
        "conformal_nonconformity": 1.0,
        "conformal_threshold": INF,  # no max_k, no k: the retrieval calibration had no flagged threshold
        "conformal_set_size": 2,
        "conformal_guaranteed": False,
        "conformal_score_family": "rank",
    }
    items = [("c1", "a", meta), ("c2", "b", {**meta, "conformal_nonconformity": 2.0})]
    chunks, reason = chunks_from_metadata(items, cal)
    assert not any(c.guaranteed for c in chunks)
    assert "threshold is +inf" in reason and "max_k" not in reason  # was "the retriever cut its conformal set"
    cut = {**meta, "conformal_threshold": 3.0, "conformal_set_size": 5}
    assert chunks_from_metadata([("c1", "a", cut)], cal)[1] == (
        "the retriever cut its conformal set of 5 chunks to 1 (max_k / k)"
    )


# ------------------------------------------------------------------------------------------ the whole flow


class _World:
    """``n`` questions; gold chunk ``g{i}`` always in the pool; the generator answers right on a share ``ceiling``."""

    def __init__(self, n: int, *, ceiling: float, seed: int = 2) -> None:
        self.examples = [
            CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=(f"ans{i}",), id=f"q{i}")
            for i in range(n)
        ]
        self.right = set(np.flatnonzero(np.random.default_rng(seed).random(n) < ceiling).tolist())
        self.calls = 0

    def host(self):
        from tests.conftest import FakeAnswerSetHost

        texts = {f"g{i}": f"gold {i}" for i in range(len(self.examples))} | {"d0": "distractor"}

        def pool(question: str) -> CandidatePool:
            i = int(question.split()[1].rstrip("?"))
            return CandidatePool.from_unsorted([f"g{i}", "d0"], [texts[f"g{i}"], "distractor"], [0.9, 0.5])

        async def sample(question: str, context: str) -> list[Sample]:
            self.calls += 1
            i = int(question.split()[1].rstrip("?"))
            if context == f"gold {i}" and i in self.right:
                return [Sample(f"ans{i}")] * 3 + [Sample("noise")]
            return [Sample("noise")] * M

        return FakeAnswerSetHost(pool, texts.get, sample, pool_size=2, identity={"llm": {"class": "Fake"}})


def _conformalizer(level: float, split: SplitOptions) -> AnswerSetConformalizer:
    return AnswerSetConformalizer(
        level,
        sampling=SamplingOptions(n_samples=M, progress=False, pilot=None),
        split=split,
        clustering=ClusteringOptions(method="exact", tau=None),
    )


def test_a_held_out_bound_makes_a_weak_generator_claim_something() -> None:
    world = _World(200, ceiling=0.46)  # 0.45 here; 34 of the 60 optimisation questions miss: bound 0.676
    split = SplitOptions(optimise=True, bo_calls=3, generator_miss_bound="held-out", retrieval_miss_bound=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = _conformalizer(0.2, split).conformalize(world.host(), world.examples)
    opt, _ = split_examples(world.examples, (0.3, 0.7), seed=0)
    misses = sum(1 for ex in opt if int(ex.id[1:]) not in world.right)
    bound = clopper_pearson_upper(misses, len(opt), 0.95)
    info = cal.optimisation_
    assert info["miss_bound_generation"] == bound == cal.miss_bound_generation_  # chosen on the 60 held-out only
    assert info["feasible"] and cal.alpha_generation_ > bound and cal.miss_bound_retrieval_ == 0.0
    assert not set(info["optimisation_question_ids"]) & set(cal.question_ids_)
    k = flagged_rank(len(cal.generation_scores_), cal.alpha_generation_, bound)
    assert cal.generation_threshold_ == sorted(cal.generation_scores_)[k.rank - 1]
    assert cal.guaranteed_ and math.isfinite(cal.generation_threshold_)
    # the same data without the bound (the code before): every level keeps +inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = _conformalizer(0.2, SplitOptions(optimise=True, bo_calls=3)).conformalize(world.host(), world.examples)
    assert math.isinf(plain.generation_threshold_) and not plain.guaranteed_
    assert not plain.optimisation_["feasible"]  # and the optimiser now says so


def test_bo_says_when_no_split_is_feasible() -> None:
    world = _World(200, ceiling=0.46)
    split = SplitOptions(optimise=True, bo_calls=3, generator_miss_bound="held-out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = _conformalizer(0.6, split).conformalize(world.host(), world.examples)  # alpha 0.4 < the bound
    said = [str(w.message) for w in caught if issubclass(w.category, CoverageCeilingWarning)]
    assert any(m.startswith("No split of alpha = 0.4 can be flagged guaranteed on the 60") for m in said)
    info = cal.optimisation_
    assert info["feasible"] is False and info["source"] == "infeasible" and "generator" in info["infeasible_reason"]
    assert "miss_bound_generation" not in info and info["held_out_miss_bound_generation"] > 0.4
    assert cal.miss_bound_generation_ is None and not cal.guaranteed_


def test_python_says_what_the_generator_needs_before_sampling_the_calibration(caplog) -> None:
    world = _World(60, ceiling=0.46)
    seen: list[tuple[str, int]] = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.getMessage(), world.calls))

    spy = Spy()
    logging.getLogger("conformal_rag_plugins").addHandler(spy)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _conformalizer(0.9, SplitOptions()).conformalize(world.host(), world.examples)
    finally:
        logging.getLogger("conformal_rag_plugins").removeHandler(spy)
    reach = [(message, calls) for message, calls in seen if "generator reach under rule" in message]
    need = generator_need(60, 0.9, SplitOptions())
    assert reach == [(f"Answer-set generator reach under rule {THRESHOLD_RULE!r}: {need.describe()}", 0)]  # no draw yet
    assert world.calls == 60


def test_an_optimised_split_takes_a_bound_above_half_of_alpha() -> None:
    world = _World(200, ceiling=0.46)
    split = SplitOptions(optimise=True, bo_calls=3, generator_miss_bound=0.6, retrieval_miss_bound=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = _conformalizer(0.2, split).conformalize(world.host(), world.examples)  # 0.6 > alpha / 2 = 0.4
    assert cal.miss_bounds_ == (0.0, 0.6) and cal.alpha_generation_ > 0.6
    assert "miss_bound_generation" in cal.optimisation_ and cal.optimisation_["feasible"]


def test_pac_takes_the_generator_bound_through_pac_quantile() -> None:
    gen = _weak_scores()
    split = SplitOptions(method="pac", delta=0.2, alpha_retrieval=0.05, generator_miss_bound=0.6)
    cal = _combined(split, gen, alpha=0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pac_quantile(gen, 0.75, 0.1, miss_bound=0.6)
        default = pac_quantile(gen, 0.75, 0.1)
    assert cal.generation_threshold_ == expected and math.isfinite(expected) and math.isinf(default)
    assert cal.miss_bounds_ == (None, 0.6) and cal.guaranteed_
