"""The tuned host in one Python call gives the command line's numbers on the same data (issue 34).

A seeded slice of the bundled long documents (50 documents of about 670 MiniLM tokens, their
questions labelled with the *document* ids, 60% calibration / 40% held out) goes through
``conformal-rag calibrate`` (in-process) and through ``ConformalRetriever.from_documents`` with the
framework's own ``Document``s, each on its own Chroma directory. On the held-out questions both must
give the same coverage and mean context tokens (within 5%; they take one route, so the chosen host
and threshold are equal too). Negative controls: the plain dense store calibrated with
``calibrate_retriever`` on the same chunks returns far more tokens, and another split seed gives
another threshold, so the equality checks can fail. The measuring code is
``benchmarks/tuned_one_call.py`` (whose numbers are in ``benchmarks/results/tuned_one_call.md``).
About 15 s per framework.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tuned_one_call.py"
#: The issue's bound on the gap between the Python path and the command line.
TOLERANCE = 0.05
#: The tuned hybrid's context must be well below the plain dense store's (measured: 0.56x and 0.62x).
PLAIN_RATIO = 1.25


def _bench():
    spec = importlib.util.spec_from_file_location("benchmark_tuned_one_call", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_python_one_call_gives_the_command_lines_numbers(framework, tmp_path) -> None:
    bench = _bench()
    result = bench.measure(framework, tmp_path)
    cli, py, plain = (result["rows"][k] for k in ("cli", "python", "plain"))
    assert result["n_docs"] == 50 and result["n_held_out"] >= 60, result
    for key in ("fusion_method", "dense_weight", "pool_size", "unit", "score_family", "n_calibration"):
        assert py[key] == cli[key], (key, py, cli)
    assert py["threshold"] == pytest.approx(cli["threshold"], rel=1e-9, abs=1e-12)
    assert abs(py["coverage"] - cli["coverage"]) <= TOLERANCE * cli["coverage"], (py, cli)
    assert abs(py["mean_tokens"] - cli["mean_tokens"]) <= TOLERANCE * cli["mean_tokens"], (py, cli)
    assert min(py["coverage"], cli["coverage"]) >= 0.8, (py, cli)  # a sanity floor, not the guarantee's test
    # negative control 1: the plain dense store over the same chunks serves far more context
    assert plain["mean_tokens"] >= PLAIN_RATIO * py["mean_tokens"], (plain, py)


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_another_split_seed_changes_the_threshold(framework, tmp_path) -> None:
    """Negative control 2: the equality above is not automatic (another seed, another calibration split)."""
    from conformal_rag_plugins.retrieval.options import RetrievalOptions

    bench = _bench()
    entries, cal_q, _ = bench.slice_data()
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex import ConformalRetriever
    else:
        from conformal_rag_plugins.langchain import ConformalRetriever  # type: ignore[assignment]
    docs = bench.framework_documents(framework, entries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeds = [
            ConformalRetriever.from_documents(
                docs, cal_q, options=RetrievalOptions(random_state=seed, progress=False), persist_dir=tmp_path
            ).calibration
            for seed in (0, 1)
        ]
    assert seeds[0].threshold_ != seeds[1].threshold_ or seeds[0].selection_ != seeds[1].selection_
    assert seeds[0].question_ids_ != seeds[1].question_ids_
