"""The answer-set route: ``AnswerSetConformalizer._plan`` as named steps; a host protocol adapters implement plainly.

No callable class attributes to climb through (the old ``LLMReader`` ClassVars ``sampler_class``,
``read_texts``, ``calibrate_host``): each adapter's answer host has ordinary methods.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from conformal_rag_plugins.answer_sets import host as host_module
from conformal_rag_plugins.answer_sets.conformalizer import AnswerSetConformalizer
from conformal_rag_plugins.answer_sets.host import AnswerSetHost, GoldPreparingHost
from conformal_rag_plugins.answer_sets.options import ClusteringOptions, SamplingOptions, SplitOptions

PROTOCOL = ("fetch", "texts_for", "calibrate_retrieval", "sampler", "embedding")
STEPS = (
    "_labelled",
    "_optimisation_split",
    "_checked_pilot",
    "_generator_stage",
    "_retrieval_stage",
    "_optimised_split",
    "_described",
)


def _answer_hosts() -> list[type]:
    from conformal_rag_plugins.langchain.calibrate_answers import LangChainAnswerHost
    from conformal_rag_plugins.llamaindex.calibrate_answers import LlamaIndexAnswerHost

    return [LangChainAnswerHost, LlamaIndexAnswerHost]


def test_the_protocol_says_what_an_adapter_provides() -> None:
    assert set(PROTOCOL) <= set(dir(AnswerSetHost))
    assert not hasattr(host_module, "LLMReader")  # no base class of hooks to climb through


@pytest.mark.parametrize("reader", _answer_hosts(), ids=lambda c: c.__name__)
def test_each_adapter_host_implements_it_with_plain_methods(reader: type) -> None:
    assert reader.__mro__[1:] == (object,)  # no base class: what it provides is in its own body
    for name in (*PROTOCOL, "prepare_gold"):
        assert inspect.isfunction(reader.__dict__[name]), name  # a def, not a staticmethod(...) hook
    hooks = [k for k, v in vars(reader).items() if isinstance(v, staticmethod | classmethod | type)]
    assert hooks == []
    assert not hasattr(reader, "calibrate_host")  # one name, one meaning: the adapter's method is calibrate_retrieval


@pytest.mark.parametrize("reader", _answer_hosts(), ids=lambda c: c.__name__)
def test_an_adapter_host_satisfies_both_protocols(reader: type) -> None:
    instance = object.__new__(reader)
    assert isinstance(instance, AnswerSetHost) and isinstance(instance, GoldPreparingHost)


def test_plan_is_a_short_list_of_named_steps_in_order() -> None:
    source = textwrap.dedent(inspect.getsource(AnswerSetConformalizer._plan))
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    assert len(body) <= 20
    called = [n.func.attr for n in ast.walk(ast.Module(body=body, type_ignores=[]))
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in STEPS]  # fmt: skip
    positions = {name: source.index(f"self.{name}(") for name in STEPS}
    assert sorted(called, key=positions.get) == list(STEPS) and set(called) == set(STEPS)
    assert [name for name, _ in sorted(positions.items(), key=lambda kv: kv[1])] == list(STEPS)


def test_a_host_without_prepare_gold_is_used_as_given(fake_answer_host) -> None:
    from .test_conformalizer import fake_host

    host = fake_host(fake_answer_host, 30)
    assert not isinstance(host, GoldPreparingHost)
    conformalizer = AnswerSetConformalizer(
        0.6,
        sampling=SamplingOptions(n_samples=4, progress=False, pilot=None),
        split=SplitOptions(),
        clustering=ClusteringOptions(method="exact", tau=None),
    )
    cal = conformalizer.conformalize(host, host.examples)
    assert cal.retrieval_.n_calibration_ == 30  # every example, none dropped or re-made
