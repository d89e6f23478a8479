"""``RetrievalConformalizer(level).conformalize(host, examples)``: the MAPIE-shaped retrieval entry point.

It must give exactly what :func:`calibrate_on_host` (exported as ``calibrate_host``) gives with the same
settings (one flow, two doors),
take the whole host record (fingerprint, pool size, corpus), and refuse the arguments of the other form.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conformal_rag_plugins import RetrievalConformalizer, calibrate_host
from conformal_rag_plugins.core.errors import CalibrationError, ConformalError
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.conformalizer import calibrate_on_host
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.host import RetrievalHost, check_gold_on_host, observe_host
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool

FP = Fingerprint("none", "list", "cosine", "toy", 8, "cosine")
IDS = tuple(f"c{i}" for i in range(8))


class ListHost:
    """A host over a fixed, seeded score table: question ``q{k}`` gets its own row of 8 scores."""

    pool_size = 8

    def __init__(self, n: int, seed: int = 7) -> None:
        self.rows = np.random.default_rng(seed).uniform(0.0, 1.0, size=(n, len(IDS)))
        self.fetched: list[str] = []

    def fetch(self, question: str, group_key: str | None = None) -> CandidatePool:
        self.fetched.append(question)
        row = self.rows[int(question[1:])]
        groups = [f"g{int(i[1:]) % 2}" for i in IDS] if group_key else None
        return CandidatePool.from_unsorted(list(IDS), [f"text {i}" for i in IDS], row.tolist(), groups=groups)

    def existing_ids(self, ids):
        return set(IDS) & set(ids)

    def all_ids(self):
        return list(IDS)

    def fingerprint(self) -> Fingerprint:
        return FP

    def prepare_gold(self, examples):
        return check_gold_on_host(self, examples)


def _examples(n: int) -> list[CalibrationExample]:
    rng = np.random.default_rng(3)
    return [
        CalibrationExample(f"q{k}", gold_ids=(IDS[int(rng.integers(len(IDS)))],), metadata={"tenant": f"t{k % 2}"})
        for k in range(n)
    ]


def test_a_list_host_speaks_the_protocol() -> None:
    assert isinstance(ListHost(1), RetrievalHost)
    assert not isinstance([], RetrievalHost)


@pytest.mark.parametrize(
    "settings",
    [
        {"score": "similarity"},
        {"score": "rank", "method": "pac", "delta": 0.1},
        {"score": "auto", "random_state": 4},
        {"score": "relative", "control": "recall"},
    ],
)
def test_conformalize_on_a_host_is_calibrate_host(settings) -> None:
    examples = _examples(60)
    fitted = RetrievalConformalizer(0.8, **settings).conformalize(ListHost(60), examples)
    expected = calibrate_host(ListHost(60), examples, RetrievalOptions(0.8, progress=False, **settings))
    assert replace(fitted.calibration_, created_at_=expected.created_at_) == expected  # all but the time stamp
    assert fitted.threshold_ == expected.threshold_
    assert fitted.calibration_.fingerprint_ == FP and fitted.calibration_.pool_size_ == 8
    assert fitted.calibration_.corpus_ == expected.corpus_ and fitted.calibration_.corpus_


def test_group_by_on_a_host_gives_the_per_group_thresholds_of_calibrate_host() -> None:
    examples = _examples(80)
    fitted = RetrievalConformalizer(0.8, score="similarity").conformalize(ListHost(80), examples, group_by="tenant")
    expected = calibrate_host(
        ListHost(80), examples, RetrievalOptions(0.8, score="similarity", group_by="tenant", progress=False)
    )
    assert fitted.calibration_.groups_ == expected.groups_
    assert set(fitted.calibration_.groups_) == {"t0", "t1"}


def test_chunk_group_key_on_a_host_gives_label_conditional_thresholds() -> None:
    examples = _examples(80)
    fitted = RetrievalConformalizer(0.8, score="similarity").conformalize(
        ListHost(80), examples, chunk_group_key="kind"
    )
    expected = calibrate_host(
        ListHost(80), examples, RetrievalOptions(0.8, score="similarity", chunk_group_key="kind", progress=False)
    )
    assert fitted.calibration_.chunk_group_key_ == "kind"
    assert fitted.calibration_.groups_ == expected.groups_


def test_the_host_is_queried_once_per_example_in_order() -> None:
    host, examples = ListHost(30), _examples(30)
    RetrievalConformalizer(0.8).conformalize(host, examples)
    assert host.fetched == [ex.question for ex in examples]


def test_optimisation_fraction_reaches_the_auto_split() -> None:
    """Both doors honour the fraction; the default (0.3) is the negative control."""
    examples = _examples(100)
    chosen = RetrievalConformalizer(0.8, score="auto", optimisation_fraction=0.5).conformalize(ListHost(100), examples)
    options = RetrievalOptions(0.8, score="auto", optimisation_fraction=0.5, progress=False)
    assert chosen.calibration_.selection_["n_optimisation"] == 50
    assert calibrate_host(ListHost(100), examples, options).selection_["n_optimisation"] == 50
    default = RetrievalConformalizer(0.8, score="auto").conformalize(ListHost(100), examples)
    assert default.calibration_.selection_["n_optimisation"] == 30


def test_from_options_keeps_every_setting() -> None:
    options = RetrievalOptions(
        0.85, score="rank", method="pac", delta=0.2, random_state=9, strict=True, optimisation_fraction=0.4
    )
    made = RetrievalConformalizer.from_options(options)
    assert (made.confidence_level, made.score, made.method, made.delta) == (0.85, "rank", "pac", 0.2)
    assert (made.random_state, made.strict, made.optimisation_fraction, made.control) == (9, True, 0.4, "coverage")
    assert RetrievalConformalizer.from_options(RetrievalOptions()).score == "relative"


def test_a_host_needs_examples_and_nothing_the_host_already_says() -> None:
    """One call shape: the other form's arguments are not parameters of ``conformalize`` at all."""
    host, examples = ListHost(20), _examples(20)
    with pytest.raises(TypeError, match="examples"):
        RetrievalConformalizer(0.8).conformalize(host)
    with pytest.raises(TypeError, match="pool_size"):
        RetrievalConformalizer(0.8).conformalize(host, examples, pool_size=8)
    with pytest.raises(TypeError, match="groups"):
        RetrievalConformalizer(0.8).conformalize(host, examples, groups=["a"] * 20)
    with pytest.raises(CalibrationError, match="method must be"):
        RetrievalConformalizer(0.8, method="bogus").conformalize(host, examples)
    assert host.fetched == []  # refused before any query


def test_conformalize_has_one_call_shape() -> None:
    """The host and the examples, positionally; the fingerprint, pool size and groups are not parameters."""
    import inspect

    params = inspect.signature(RetrievalConformalizer.conformalize).parameters
    assert list(params)[:3] == ["self", "host", "examples"]
    assert params["examples"].default is inspect.Parameter.empty
    assert not {"fingerprint", "pool_size", "groups", "source"} & set(params)


def test_observations_take_no_examples_and_need_the_fingerprint() -> None:
    host, examples = ListHost(20), _examples(20)
    obs = observe_host(host, examples, progress=False).observations
    with pytest.raises(CalibrationError, match="takes a host"):  # the pools to conformalize: a clear pointer
        RetrievalConformalizer(0.8).conformalize(obs, examples)
    with pytest.raises(TypeError, match="fingerprint"):
        RetrievalConformalizer(0.8).conformalize_pools(obs, pool_size=8)
    with pytest.raises(TypeError, match=r"examples|positional"):
        RetrievalConformalizer(0.8).conformalize_pools(obs, examples, fingerprint=FP, pool_size=8)
    with pytest.raises(TypeError, match="chunk_group_key"):  # chunk_group_key needs the host
        RetrievalConformalizer(0.8).conformalize_pools(obs, fingerprint=FP, pool_size=8, chunk_group_key="kind")
    fitted = RetrievalConformalizer(0.8, score="similarity").conformalize_pools(obs, fingerprint=FP, pool_size=8)
    on_host = RetrievalConformalizer(0.8, score="similarity").conformalize(ListHost(20), examples)
    assert fitted.threshold_ == on_host.threshold_


def test_conformalize_on_a_host_builds_no_second_conformalizer(monkeypatch) -> None:
    """No round trip: the estimator calibrates itself, it does not pack itself into options and rebuild."""
    import conformal_rag_plugins.retrieval.conformalizer as module

    def refuse(*args, **kwargs):
        raise AssertionError("conformalize went back through from_options / calibrate_from_pools")

    monkeypatch.setattr(module.RetrievalConformalizer, "from_options", classmethod(refuse))
    monkeypatch.setattr(module, "calibrate_from_pools", refuse)
    fitted = RetrievalConformalizer(0.8, score="similarity").conformalize(ListHost(20), _examples(20))
    assert fitted.calibration_.n_calibration_ == 20


def test_group_by_and_chunk_group_key_together_are_refused() -> None:
    with pytest.raises(ConformalError, match="not both"):
        RetrievalConformalizer(0.8).conformalize(ListHost(20), _examples(20), group_by="tenant", chunk_group_key="k")


def test_the_package_calibrate_host_is_calibrate_on_host() -> None:
    assert calibrate_host is calibrate_on_host
