"""``AnswerSetConformalizer``: MAPIE-shaped, frozen options, and the same numbers as before the refactor.

A small fake host implements the :class:`AnswerSetHost` protocol: every question has a pool
(gold ranked anywhere, or missed), and a sampler whose answers depend on the chunk. The
expected thresholds, splits and generator scores were recorded by the code before issue 22
(``calibrate_stages`` driven by ``HostHooks`` closures, at commit 298efd1) on this host.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import json
import math
import warnings

import pytest

from conformal_rag_plugins.answer_sets.conformalizer import AnswerSetConformalizer
from conformal_rag_plugins.answer_sets.host import AnswerSetHost, GeneratorSampler
from conformal_rag_plugins.answer_sets.options import (
    AdaptiveSchedule,
    ClusteringOptions,
    RetrievalStageOptions,
    SamplingOptions,
    SplitOptions,
)
from conformal_rag_plugins.answer_sets.sample_record import Sample
from conformal_rag_plugins.core.errors import (
    CalibrationError,
    CoverageCeilingWarning,
    InfiniteThresholdWarning,
    NotFittedError,
)
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.pool_calibration import (
    CandidatePool,
)
from conformal_rag_plugins.storage.jsonio import encode_float

# Regression values computed under the plain rank; the pool-miss rule is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

M = 4


def fake_host(factory, n: int = 60, *, miss_every: int = 0, wrong_every: int = 0):
    """``n`` questions; question i's gold chunk ``g{i}`` ranks by ``0.95 - 0.03 (i mod 13)`` among 3 distractors."""
    examples = [
        CalibrationExample(f"question {i}?", gold_ids=(f"g{i}",), answers=(f"ans{i}",), id=f"q{i}") for i in range(n)
    ]
    texts = {f"g{i}": f"gold {i}" for i in range(n)} | {f"d{j}": f"distractor {j}" for j in range(5)}

    def pool(i: int) -> CandidatePool:
        miss = miss_every and i % miss_every == 0
        ids = [f"d{j}" for j in range(3)] + ([] if miss else [f"g{i}"])
        scores = [0.9 - 0.1 * j for j in range(3)] + ([] if miss else [0.95 - 0.03 * (i % 13)])
        return CandidatePool.from_unsorted(ids, [texts[c] for c in ids], scores)

    pools = {ex.question: pool(i) for i, ex in enumerate(examples)}

    async def sample(question: str, context: str) -> list[Sample]:
        i = int(question.split()[1].rstrip("?"))
        if context == f"gold {i}" and not (wrong_every and i % wrong_every == 0):
            got = [f"ans{i}"] * (2 + i % 3) + ["noise"] * (M - 2 - i % 3)
        else:
            got = ["noise", context.split()[0], "noise", "I don't know"]
        return [Sample(t) for t in got]

    identity = {"llm": {"class": "Fake", "name": "fake"}, "sampling": {"n_samples": M}}
    host = factory(pools.__getitem__, texts.get, sample, pool_size=4, identity=identity)
    host.examples = examples
    return host


# (host, options) -> (q_ret, q_gen, alpha_retrieval, sha256 of the generator scores), recorded before issue 22
SCENARIOS = {
    "bonferroni": ({}, {}),
    "alpha_ret": ({}, {"alpha_retrieval": 0.1}),
    "pac": ({}, {"method": "pac", "delta": 0.2, "confidence_level": 0.5}),
    "hmp_misses": ({"miss_every": 20}, {"method": "hmp", "confidence_level": 0.5}),
    "wrong": ({"wrong_every": 3}, {"confidence_level": 0.7}),
    "bo_bonf": ({"n": 80}, {"optimise": True}),
    "bo_hmp": ({"n": 80}, {"optimise": True, "method": "hmp", "confidence_level": 0.5}),
    "rougeL": ({}, {"clustering": ClusteringOptions()}),
}
BEFORE = {
    "bonferroni": (0.2500000000000001, -0.5, 0.2, "ff20b4cda8559a7d"),
    "alpha_ret": (0.28, -0.5, 0.1, "ff20b4cda8559a7d"),
    "pac": (0.2500000000000001, -0.5, 0.25, "ff20b4cda8559a7d"),
    "hmp_misses": (0.31000000000000005, math.inf, 0.125, "ff20b4cda8559a7d"),
    "wrong": (0.2500000000000001, math.inf, 0.15, "4dd8204798e2d6f0"),
    "bo_bonf": (0.22000000000000008, -0.5, 0.28590359505586993, "1913108eb7237119"),
    # judged at the calibration's 56 questions (not the optimisation split's 24), no weight beats the equal one
    "bo_hmp": (0.28, math.inf, 0.125, "1913108eb7237119"),
    "rougeL": (0.2500000000000001, -0.5, 0.2, "ff20b4cda8559a7d"),
}


def _conformalizer(confidence_level: float = 0.6, clustering: ClusteringOptions | None = None, **split):
    return AnswerSetConformalizer(
        confidence_level,
        # pilot=None: every example calibrates: the numbers recorded before the pilot
        sampling=SamplingOptions(n_samples=M, progress=False, pilot=None),
        split=SplitOptions(bo_calls=4, **split),
        clustering=clustering or ClusteringOptions(method="exact", tau=None),
    )


def _quietly(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return call()


def _digest(scores) -> str:
    return hashlib.sha256(json.dumps([encode_float(s) for s in scores]).encode()).hexdigest()[:16]


def test_using_the_fitted_attributes_before_conformalize_raises() -> None:
    conformalizer = AnswerSetConformalizer(0.7)
    for name in ("calibration_", "retrieval_threshold_", "generation_threshold_"):
        with pytest.raises(NotFittedError, match="not fitted yet: call conformalize"):
            getattr(conformalizer, name)
    assert not hasattr(conformalizer, "calibration_")  # NotFittedError is an AttributeError


@pytest.mark.parametrize(
    "options", [SamplingOptions(), SplitOptions(), ClusteringOptions(), RetrievalStageOptions(), AdaptiveSchedule()]
)
def test_option_objects_are_frozen(options) -> None:
    field = dataclasses.fields(options)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(options, field, None)
    assert options.__doc__ and "Examples" in options.__doc__


def test_option_defaults_are_the_keyword_defaults_before_the_grouping() -> None:
    s, p, c, r = SamplingOptions(), SplitOptions(), ClusteringOptions(), RetrievalStageOptions()
    assert (s.n_samples, s.max_concurrency, s.timeout, s.retries, s.cache, s.progress) == (10, 4, 120.0, 2, None, True)
    assert (p.method, p.alpha_retrieval, p.delta, p.hmp_weight, p.optimise) == ("bonferroni", None, None, None, False)
    assert (p.optimisation_fraction, p.bo_calls, p.random_state) == (0.3, 15, 0)
    assert c.record() == {"method": "rougeL", "tau": 0.7, "score": "frequency"} and c.match_threshold == 0.3
    assert (r.calibration, r.score, r.pool_size) == (None, "relative", None)
    assert inspect.signature(AnswerSetConformalizer).parameters["confidence_level"].default == 0.9


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_conformalize_gives_the_thresholds_of_the_code_before_the_refactor(name: str, fake_answer_host) -> None:
    host_kw, kw = SCENARIOS[name]
    host = fake_host(fake_answer_host, **host_kw)
    conformalizer = _conformalizer(**kw)
    cal = _quietly(lambda: conformalizer.conformalize(host, host.examples))
    assert conformalizer.calibration_ is cal
    got = (cal.retrieval_threshold_, cal.generation_threshold_, cal.alpha_retrieval_, _digest(cal.generation_scores_))
    assert got == BEFORE[name], got
    assert (conformalizer.retrieval_threshold_, conformalizer.generation_threshold_) == got[:2]
    assert cal.generator_ == {"llm": {"class": "Fake", "name": "fake"}, "sampling": {"n_samples": M}, "embedding": None}
    assert cal.model_ == "fake" and cal.n_samples_ == M


def test_a_wrong_threshold_would_be_caught(fake_answer_host) -> None:
    """Negative control: another split gives other numbers, so the comparison above can fail."""
    host = fake_host(fake_answer_host)
    cal = _quietly(lambda: _conformalizer(alpha_retrieval=0.05).conformalize(host, host.examples))
    got = (cal.retrieval_threshold_, cal.generation_threshold_, cal.alpha_retrieval_, _digest(cal.generation_scores_))
    assert got != BEFORE["bonferroni"]
    assert cal.retrieval_threshold_ > BEFORE["bonferroni"][0]  # a smaller alpha_retrieval keeps more chunks


def test_aconformalize_equals_conformalize_and_warns_at_the_callers_line(fake_answer_host) -> None:
    host = fake_host(fake_answer_host, 40, wrong_every=2)
    sync = _quietly(lambda: _conformalizer(0.7).conformalize(host, host.examples))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        warnings.simplefilter("always", CoverageCeilingWarning)
        got = asyncio.run(_conformalizer(0.7).aconformalize(host, host.examples))
    assert got.to_dict()["generation_scores"] == sync.to_dict()["generation_scores"]
    assert got.retrieval_threshold_ == sync.retrieval_threshold_
    assert got.generation_threshold_ == sync.generation_threshold_
    (w,) = [w for w in caught if issubclass(w.category, CoverageCeilingWarning)]
    assert w.filename == __file__, w.filename


def test_bad_requests_fail_before_any_llm_call(fake_answer_host) -> None:
    host = fake_host(fake_answer_host, 30)
    for kw, match in [
        ({"method": "pac"}, "needs delta"),
        ({"method": "pac", "delta": 0.1, "delta_retrieval": 0.2}, "delta_retrieval"),
        ({"optimise": True, "optimisation_fraction": 1.0}, "optimisation_fraction"),
    ]:
        with pytest.raises(CalibrationError, match=match):
            _conformalizer(**kw).conformalize(host, host.examples)
    with pytest.raises(CalibrationError, match="No calibration examples"):
        _conformalizer().conformalize(host, [])
    assert host.calls == 0


def test_the_fake_host_and_both_adapters_readers_satisfy_the_protocol(fake_answer_host) -> None:
    from conformal_rag_plugins.langchain.calibrate_answers import LangChainAnswerHost
    from conformal_rag_plugins.llamaindex.calibrate_answers import LlamaIndexAnswerHost

    assert isinstance(fake_host(fake_answer_host, 2), AnswerSetHost) and isinstance(
        fake_host(fake_answer_host, 2), GeneratorSampler
    )
    for reader in (LangChainAnswerHost, LlamaIndexAnswerHost):
        for name in ("fetch", "texts_for", "calibrate_retrieval", "sampler", "embedding"):
            assert callable(getattr(reader, name)), (reader, name)


def test_no_function_of_the_calibration_chain_takes_more_than_eight_parameters() -> None:
    from conformal_rag_plugins.answer_sets import adaptive_context, calibration, engine, split_optimisation, stages
    from conformal_rag_plugins.langchain import calibrate_answers as lc
    from conformal_rag_plugins.llamaindex import calibrate_answers as li

    chain = [
        li.calibrate_answer_sets,
        lc.calibrate_answer_sets,
        AnswerSetConformalizer.__init__,
        AnswerSetConformalizer.conformalize,
        stages.acalibrate_end_to_end,
        split_optimisation.optimise_split_on_host,
        split_optimisation.choose_split,
        calibration.AnswerSetCalibration.from_stages,
        engine.acalibrate_generation,
        adaptive_context.aadaptive_answer,
    ]
    for fn in chain:
        params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
        assert len(params) <= 8, (fn.__qualname__, params)

