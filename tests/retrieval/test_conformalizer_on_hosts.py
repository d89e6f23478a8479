"""``RetrievalConformalizer(level).conformalize(reader, examples)`` on each framework's real dense host.

The adapters' readers (``LlamaIndexHost.of``, ``LangChainHost.of``) are what ``calibrate_retriever``
builds; the conformalizer on the reader must give the same calibration as the adapter's function on the
host (MiniLM + Chroma, SQuAD questions), and a wrong level must not.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import replace

import pytest

from conformal_rag_plugins import RetrievalConformalizer
from conformal_rag_plugins.retrieval.options import RetrievalOptions

pytestmark = pytest.mark.integration

N = 40  # questions: enough for a finite threshold at 0.9 (the rank needs n >= 9)


def _reader(framework: str, host):
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import LlamaIndexHost

        return LlamaIndexHost.of(host, pool_size=50)
    from conformal_rag_plugins.langchain import LangChainHost

    return LangChainHost.of(host, pool_size=50)


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_the_conformalizer_on_a_reader_is_the_adapters_calibrate_retriever(host_factory, dropin_examples, framework):
    host = host_factory(framework, "dense").host
    examples = list(dropin_examples[:N])
    adapter = importlib.import_module(f"conformal_rag_plugins.{framework}")
    expected = adapter.calibrate_retriever(
        host, examples, confidence_level=0.9, pool_size=50, options=RetrievalOptions(score="similarity", progress=False)
    )
    fitted = RetrievalConformalizer(0.9, score="similarity").conformalize(_reader(framework, host), examples)
    cal = fitted.calibration_
    assert replace(cal, created_at_=expected.created_at_) == expected
    assert cal.fingerprint_.framework == framework and cal.pool_size_ == 50 and cal.corpus_
    assert math.isfinite(cal.threshold_)  # the similarity nonconformity is minus the score
    # negative control: another level on the same pools moves the threshold
    other = RetrievalConformalizer(0.7, score="similarity").conformalize(_reader(framework, host), examples)
    assert other.threshold_ != cal.threshold_
