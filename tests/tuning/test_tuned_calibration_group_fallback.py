"""``group_fallback`` in the tuned paths: ``calibrate_tuned``, both ``calibrate_hybrid_retriever`` and the CLI.

Plain calibration got ``group_fallback`` (``"keep_all"`` by default, ``"pooled"`` by name);
the tuned default path silently had only the default. Fakes stand in for the hosts: these
tests check where the option goes, not the statistics (see ``test_groups_fallback.py``).
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import ConformalError, SmallGroupWarning
from conformal_rag_plugins.datasets.examples import CalibrationExample
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool
from conformal_rag_plugins.tuning.tuned_calibration import FusionConfig, calibrate_tuned

GRID = (FusionConfig("zscore", 0.5), FusionConfig("minmax", 0.5))
POOL = 10


def _examples(n_big: int = 90, n_small: int = 6) -> list[CalibrationExample]:
    out = []
    for i in range(n_big + n_small):
        tenant = "big" if i < n_big else "small"
        out.append(
            CalibrationExample(f"question {i}?", gold_ids=(f"c{i % POOL}",), id=f"q{i}", metadata={"tenant": tenant})
        )
    return out


def _fetch(question: str) -> CandidatePool:
    """Ten candidates; the gold ``c{i % 10}`` sits at position ``i % 10``."""
    rng = np.random.default_rng(int(question.split()[1].rstrip("?")))
    scores = np.sort(rng.uniform(0.1, 0.9, POOL))[::-1]
    return CandidatePool(tuple(f"c{j}" for j in range(POOL)), tuple("text" for _ in range(POOL)), scores)


def _fingerprint(key: object) -> Fingerprint:
    return Fingerprint("none", "fake", "cosine", "toy", 2, "cosine", "fake-hybrid")


def _tuned(examples: list[CalibrationExample], **kw: object) -> RetrievalCalibration:
    with pytest.warns(SmallGroupWarning, match="Group 'small'"):
        return _calibrate(examples, **kw)


def _calibrate(examples: list[CalibrationExample], **kw: object) -> RetrievalCalibration:
    return calibrate_tuned(
        examples,
        dict.fromkeys(GRID, _fetch),
        _fingerprint,
        pool_size=POOL,
        options=RetrievalOptions(confidence_level=0.8, score="similarity", group_by="tenant", progress=False, **kw),
    ).calibration


def test_calibrate_tuned_keeps_the_whole_pool_for_a_small_group_by_default() -> None:
    cal = _tuned(_examples())
    assert cal.group_fallback_ == "keep_all"
    assert cal.groups_["small"]["source"] == "keep-all-small-group"
    assert cal.threshold_for("small") == (math.inf, "keep-all-small-group")
    assert cal.threshold_for("big")[1] == "group" and math.isfinite(cal.threshold_for("big")[0])


def test_calibrate_tuned_takes_the_pooled_fallback_by_name(tmp_path: Path) -> None:
    cal = _tuned(_examples(), group_fallback="pooled")
    assert cal.group_fallback_ == "pooled"
    assert cal.groups_["small"]["source"] == "pooled-small-group"
    assert cal.threshold_for("small") == (cal.threshold_, "pooled-small-group")
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "cal.json"))
    assert loaded.group_fallback_ == "pooled" and loaded.selection_["rule"] == "tuned-hybrid"


def test_a_bad_fallback_is_refused_before_any_query() -> None:
    def never(question: str) -> CandidatePool:
        raise AssertionError("queried before the option was checked")

    with pytest.raises(ConformalError, match="pooled"):
        calibrate_tuned(
            _examples(),
            dict.fromkeys(GRID, never),
            _fingerprint,
            pool_size=POOL,
            options=RetrievalOptions(group_fallback="nope"),
        )


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_both_hybrid_tuning_adapters_pass_the_option_on(monkeypatch, framework: str) -> None:
    import importlib

    from conformal_rag_plugins.tuning import unit_search
    from conformal_rag_plugins.tuning.candidates import CandidateSearch

    module = importlib.import_module(f"conformal_rag_plugins.{framework}.hybrid_tuning")
    assert inspect.signature(module.calibrate_hybrid_retriever).parameters["options"].default is None
    seen: dict[str, object] = {}

    class Found:
        candidates = GRID

        def fetcher(self, c: object) -> object:
            return _fetch

        def fingerprint(self, c: object) -> Fingerprint:
            return _fingerprint(c)

        def host(self, c: object) -> object:
            return None

        def all_ids(self, host: object) -> None:
            return None

        def search(self) -> CandidateSearch:
            return CandidateSearch()

    def spy(examples: object, fetchers: object, fingerprints: object, **kw: object) -> object:
        seen.update(kw)
        with pytest.warns(SmallGroupWarning):
            return calibrate_tuned(examples, fetchers, fingerprints, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "unit_candidates", lambda *a, **k: Found())
    monkeypatch.setattr(unit_search, "calibrate_tuned", spy)
    _, cal = module.calibrate_hybrid_retriever(
        None,
        [],
        _examples(),
        confidence_level=0.8,
        pool_size=POOL,
        options=RetrievalOptions(score="similarity", group_by="tenant", group_fallback="pooled", progress=False),
    )  # fmt: skip
    assert seen["options"].group_fallback == "pooled" and cal.group_fallback_ == "pooled"  # type: ignore[attr-defined]


def test_the_cli_flag_reaches_the_tuned_default_path(monkeypatch, tmp_path: Path, capsys) -> None:
    from conformal_rag_plugins.cli import main
    from conformal_rag_plugins.llamaindex import tuned_host  # the names LlamaIndex's TUNED_HOST calls
    from conformal_rag_plugins.local import chroma

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{j}", "text": f"Passage {j}."}) + "\n" for j in range(POOL)))
    questions = tmp_path / "labelled.jsonl"
    questions.write_text("".join(json.dumps(ex.to_dict()) + "\n" for ex in _examples()), encoding="utf-8")
    seen: dict[str, object] = {}

    def spy(index: object, nodes: object, examples: list[CalibrationExample], **kw: object) -> tuple[None, object]:
        seen.update(vars(kw["options"]))
        fixed = [CalibrationExample(e.question, gold_ids=(f"c{int(e.id[1:]) % POOL}",), id=e.id, metadata=e.metadata)
                 for e in examples]  # fmt: skip
        return None, _tuned(fixed, group_fallback=seen["group_fallback"])

    monkeypatch.setattr(chroma, "chroma_client", lambda *a, **k: None)  # no Chroma in the fast tier
    monkeypatch.setattr(tuned_host, "build_chroma_index", lambda *a, **k: (None, []))
    monkeypatch.setattr(tuned_host, "calibrate_hybrid_retriever", spy)
    out = tmp_path / "cal.json"
    argv = ["calibrate", "--corpus", corpus, "--questions", questions, "--out", out, "--persist-dir",
            tmp_path / "chroma", "--group-by", "tenant", "--group-fallback", "pooled", "--quiet"]  # fmt: skip
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert seen["group_by"] == "tenant" and seen["group_fallback"] == "pooled"
    assert RetrievalCalibration.load(out).group_fallback_ == "pooled"
