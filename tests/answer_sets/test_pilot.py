"""Issue 34: answer sets say early when a target is out of reach (a seeded pilot before the full calibration).

A fake host (``host.calls`` counts LLM draws) has ``n`` questions whose gold chunk the generator
answers correctly on a chosen share. An unreachable target stops after the pilot's calls only, before
the retrieval stage is calibrated; a reachable one goes on and gives exactly the calibration of the
questions left after the pilot; a disabled pilot is the behaviour before it. Before the pilot, the
unreachable case spent every question's draws and returned a calibration that is never guaranteed.
"""

from __future__ import annotations

import math
import warnings

import pytest

from conformal_rag_plugins import AnswerSetConformalizer, PilotOptions, UnreachableTargetError
from conformal_rag_plugins.answer_sets.options import ClusteringOptions, SamplingOptions, SplitOptions
from conformal_rag_plugins.answer_sets.pilot import (
    PilotEstimate,
    draw_pilot,
    generator_share,
    highest_level,
    pilot_size,
)
from conformal_rag_plugins.answer_sets.reach import generator_need
from conformal_rag_plugins.answer_sets.reach import highest_level as highest_level_under_rule
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.binomial import clopper_pearson_upper
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError, CoverageCeilingWarning
from conformal_rag_plugins.core.quantile import flagged_rank
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool

M = 4


def _host(factory, n: int, right: callable):
    """``n`` questions; the generator answers question ``i`` right on its gold chunk when ``right(i)``."""
    examples = [
        CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=(f"ans{i}",), id=f"q{i}") for i in range(n)
    ]
    texts = {f"g{i}": f"gold {i}" for i in range(n)} | {f"d{j}": f"distractor {j}" for j in range(3)}

    def pool(i: int) -> CandidatePool:
        ids = [f"d{j}" for j in range(3)] + [f"g{i}"]
        scores = [0.9 - 0.1 * j for j in range(3)] + [0.95 - 0.03 * (i % 13)]
        return CandidatePool.from_unsorted(ids, [texts[c] for c in ids], scores)

    pools = {ex.question: pool(i) for i, ex in enumerate(examples)}

    async def sample(question: str, context: str) -> list[Sample]:
        i = int(question.split()[1].rstrip("?"))
        if context == f"gold {i}" and right(i):
            return [Sample(f"ans{i}")] * 3 + [Sample("noise")]
        return [Sample("noise")] * M

    host = factory(pools.__getitem__, texts.get, sample, pool_size=4, identity={"llm": {"class": "Fake"}})
    host.examples = examples
    retrieval_calls = []
    calibrate = host.calibrate_retrieval

    def counted(examples, **kw):
        retrieval_calls.append(len(examples))
        return calibrate(examples, **kw)

    host.calibrate_retrieval = counted
    host.retrieval_calls = retrieval_calls
    return host


def _conformalizer(confidence_level: float, pilot=PilotOptions(), **split) -> AnswerSetConformalizer:  # noqa: B008
    return AnswerSetConformalizer(
        confidence_level,
        sampling=SamplingOptions(n_samples=M, progress=False, pilot=pilot),
        split=SplitOptions(**split),
        clustering=ClusteringOptions(method="exact", tau=None),
    )


def _quietly(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def test_an_unreachable_target_stops_after_the_pilot_calls_only(fake_answer_host) -> None:
    host = _host(fake_answer_host, 60, right=lambda i: False)  # the generator never answers right
    with pytest.raises(UnreachableTargetError) as caught:
        _conformalizer(0.6).conformalize(host, host.examples)
    assert host.calls == 5  # the 5 pilot questions, not the 60
    assert host.retrieval_calls == []  # the retrieval stage was not even calibrated
    message = str(caught.value)
    assert "0 of 5 questions" in message and "ceiling ~0.00" in message
    assert "95% upper bound 0.45" in message and "needs 0.90" in message  # 1 - 0.05 ** (1/5); 1 - alpha_gen/2
    most = flagged_rank(55, 0.2).max_misses  # type: ignore[union-attr]
    assert f"generator miss bound 0.1, at most {most} misses of 55" in message  # the flag rule, not 1 - alpha_gen
    lenient = highest_level_under_rule(estimate_bound := clopper_pearson_upper(0, 5, 0.95), 55,
                                       SplitOptions(optimise=True, generator_miss_bound="held-out"))  # fmt: skip
    assert "reachable: confidence_level none" in message and estimate_bound < 0.46
    assert f"generator_miss_bound='held-out'), up to {lenient.confidence_level:.2f} at the upper bound" in message
    assert "pilot=None" in message and "Lower confidence_level" in message
    assert isinstance(caught.value, CalibrationError) and isinstance(caught.value, ConformalError)
    estimate = caught.value.estimate
    assert isinstance(estimate, PilotEstimate) and estimate.n_hits == 0 and estimate.unreachable


def test_a_reachable_target_goes_on_and_calibrates_only_the_other_questions(fake_answer_host) -> None:
    host = _host(fake_answer_host, 60, right=lambda i: i % 10 != 3)  # ceiling 0.9
    with_pilot = _quietly(lambda: _conformalizer(0.6).conformalize(host, host.examples))
    assert host.calls == 60  # the pilot's 5 and the other 55: no extra LLM call
    assert host.retrieval_calls == [55]

    pilot, rest = draw_pilot(host.examples, 5, 0)
    record = with_pilot.optimisation_["pilot"]
    assert record["question_ids"] == [ex.digest for ex in pilot] and record["n_questions"] == 5
    assert not set(record["question_ids"]) & set(with_pilot.question_ids_)
    assert len(with_pilot.question_ids_) == 55

    host.calls = 0
    without = _quietly(lambda: _conformalizer(0.6, pilot=None).conformalize(host, rest))
    assert host.calls == 55
    assert with_pilot.question_ids_ == without.question_ids_
    assert with_pilot.generation_scores_ == without.generation_scores_
    assert with_pilot.generation_threshold_ == without.generation_threshold_
    assert with_pilot.retrieval_threshold_ == without.retrieval_threshold_
    assert math.isfinite(with_pilot.generation_threshold_)


@pytest.mark.parametrize("off", [None, 0, PilotOptions(questions=0)])
def test_a_disabled_pilot_calibrates_every_question_as_before(fake_answer_host, off) -> None:
    host = _host(fake_answer_host, 60, right=lambda i: False)
    cal = _quietly(lambda: _conformalizer(0.6, pilot=off).conformalize(host, host.examples))
    assert host.calls == 60 and host.retrieval_calls == [60]
    assert len(cal.question_ids_) == 60 and "pilot" not in cal.optimisation_
    assert not cal.guaranteed_  # the old end: every question sampled, then "unreachable"


def test_a_likely_but_unproven_miss_warns_and_goes_on(fake_answer_host) -> None:
    host = _host(fake_answer_host, 60, right=lambda i: i % 3 == 0)  # pilot [8, 16, 20, 27, 42]: 2 of 5 right
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # alpha_gen 0.35 with a generator miss bound of 0.3: the flag allows 15 misses of 55, a ceiling of 0.73
        _conformalizer(0.6, alpha_retrieval=0.05, generator_miss_bound=0.3).conformalize(host, host.examples)
    pilot_warnings = [w for w in caught if issubclass(w.category, CoverageCeilingWarning) and "pilot" in str(w.message)]
    assert len(pilot_warnings) == 1 and "probably out of reach" in str(pilot_warnings[0].message)
    assert "2 of 5 questions" in str(pilot_warnings[0].message)  # upper bound 0.81 > target 0.73: no stop
    need = generator_need(55, 0.6, SplitOptions(alpha_retrieval=0.05, generator_miss_bound=0.3))
    assert need.max_misses == flagged_rank(55, 0.35, 0.3).max_misses
    assert f"needs {need.ceiling:.2f}" in str(pilot_warnings[0].message) and need.ceiling > 0.7
    assert pilot_warnings[0].filename == __file__
    assert host.calls == 60


def test_the_pilot_checks_the_flag_rule_not_the_share_of_alpha(fake_answer_host) -> None:
    """Issue 41: 2 of 5 (upper bound 0.81) at 0.6 passed the old check (1 - alpha_gen = 0.80) and sampled
    everything; the flag rule (misses <= alpha_gen / 2 = 0.1, at most 10 of 55) needs 0.90: it stops."""
    host = _host(fake_answer_host, 60, right=lambda i: i % 3 == 0)
    with pytest.raises(UnreachableTargetError, match=r"needs 0\.90") as caught:
        _quietly(lambda: _conformalizer(0.6).conformalize(host, host.examples))
    assert host.calls == 5 and host.retrieval_calls == []
    need = generator_need(55, 0.6, SplitOptions())
    assert need.ceiling == pytest.approx(1 - min(need.miss_bound, flagged_rank(55, 0.2).max_misses / 55))
    assert caught.value.estimate.target == need.ceiling and caught.value.estimate.n_calibration == 55


def test_the_pilot_leaves_enough_questions_or_does_not_run(fake_answer_host) -> None:
    host = _host(fake_answer_host, 20, right=lambda i: False)  # 18 are needed at confidence 0.8
    cal = _quietly(lambda: _conformalizer(0.8).conformalize(host, host.examples))
    assert "pilot" not in cal.optimisation_ and len(cal.question_ids_) == 20
    assert pilot_size(20, PilotOptions(), 18) == 0
    assert pilot_size(24, PilotOptions(), 18) == 4  # a fifth of 24
    assert pilot_size(1000, PilotOptions(questions=8), 18) == 8


def test_bad_requests_are_refused_before_the_pilot(fake_answer_host) -> None:
    host = _host(fake_answer_host, 60, right=lambda i: False)
    with pytest.raises(CalibrationError, match="alpha_retrieval must lie strictly"):
        _conformalizer(0.6, alpha_retrieval=0.5).conformalize(host, host.examples)
    with pytest.raises(CalibrationError, match="PilotOptions"):
        PilotOptions(confidence=1.5)
    with pytest.raises(CalibrationError, match="pilot must be"):
        PilotOptions.resolve("five")
    assert host.calls == 0


def test_the_split_decides_the_generator_target_and_the_reachable_levels() -> None:
    # Bonferroni: equal split, fixed alpha_retrieval; HMP; optimise gives the generator all of alpha
    for split in (SplitOptions(), SplitOptions(alpha_retrieval=0.05), SplitOptions(method="hmp"),
                  SplitOptions(optimise=True)):  # fmt: skip
        for level in (0.5, 0.8):
            ceiling = 1 - generator_share(1 - level, split)
            assert highest_level(ceiling, split) == pytest.approx(level)
    assert clopper_pearson_upper(2, 5, 0.95) == pytest.approx(0.8107446225622291)  # scipy beta.ppf(0.95, 3, 3)
    assert clopper_pearson_upper(18, 40, 0.95) == pytest.approx(0.591188179944719)
