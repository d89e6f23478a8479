"""A loaded calibration verifies itself: fields, cross-field agreement, thresholds, signature.

Every tampering case recomputes the SHA-256 checksum the way an editor could, so the
checksum alone cannot catch it.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/runtime/strict_json.py

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
from conformal_rag_plugins.answer_sets.options import SplitOptions
from conformal_rag_plugins.core.errors import CalibrationIntegrityError, ConformalError
from conformal_rag_plugins.core.quantile import conformal_quantile, pac_quantile
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
from conformal_rag_plugins.storage.jsonio import SIGNING_KEY_ENV

FP = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
SCORES = (*(float(x) for x in np.round(np.linspace(0.05, 0.95, 19), 6)), math.inf)


def retrieval_cal(method: str = "split", alpha: float = 0.2, delta: float | None = None) -> RetrievalCalibration:
    q = conformal_quantile(SCORES, alpha) if method == "split" else pac_quantile(SCORES, alpha, delta)
    return RetrievalCalibration(q, alpha, method, "relative", 10, len(SCORES), 1, SCORES, FP, delta_=delta)


def answer_cal(method: str = "bonferroni") -> AnswerSetCalibration:
    ret = tuple(float(x) for x in np.linspace(0.0, 0.5, 60))
    inner = RetrievalCalibration(conformal_quantile(ret, 0.1), 0.1, "split", "relative", 10, 60, 0, ret, FP)
    gen = [-1.0] * 25 + [-0.75] * 20 + [-0.5] * 12 + [math.inf] * 3
    return AnswerSetCalibration.from_stages(
        inner,
        gen,
        alpha=0.4,
        split=SplitOptions(method=method, delta=0.2 if method == "pac" else None),
        n_samples=4,
        model="fake",
        clustering={"method": "rougeL", "tau": 0.7},
    )


def resign(data: dict[str, Any]) -> dict[str, Any]:
    """Recompute the plain checksum, as anybody editing the file could."""
    body = {k: v for k, v in data.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return {**body, "checksum": hashlib.sha256(canon.encode()).hexdigest()}


def tamper(path: Path, edit) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    if isinstance(data.get("retrieval"), dict):
        data["retrieval"] = resign(data["retrieval"])
    path.write_text(json.dumps(resign(data)), encoding="utf-8")
    return path


def refused(path: Path, *words: str, loader=RetrievalCalibration.load) -> str:
    with pytest.raises(CalibrationIntegrityError) as info:
        loader(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


def test_untouched_files_load_and_recompute(tmp_path):
    for cal in (retrieval_cal(), retrieval_cal("pac", 0.2, 0.1)):
        assert RetrievalCalibration.load(cal.save(tmp_path / "r.json")) == cal
    for cal in (answer_cal(), answer_cal("pac"), answer_cal("hmp")):
        loaded = AnswerSetCalibration.load(cal.save(tmp_path / "a.json"))
        assert loaded.retrieval_threshold_ == cal.retrieval_threshold_
        assert loaded.generation_threshold_ == cal.generation_threshold_


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.update(alpha=1.5), ["alpha", "less than 1", "1.5"]),
        (lambda d: d.update(alpha=0.0), ["alpha", "greater than 0"]),
        (lambda d: d.update(method="bogus"), ["method", "'split' or 'pac'", "bogus"]),
        (lambda d: d.update(score_family="telepathy"), ["score_family", "telepathy"]),
        (lambda d: d.update(pool_size=-4), ["pool_size", "-4"]),
        (lambda d: d.update(pool_size=0), ["pool_size", "greater than or equal to 1"]),
        (lambda d: d.update(pool_size=10.0), ["pool_size", "valid integer"]),
        (lambda d: d.update(n=3), ["n = 3 but 20 scores"]),
        (lambda d: d.update(n_misses=0), ["n_misses = 0 but 1"]),
        (lambda d: d.update(threshold=99), ["stored threshold 99", "recomputed"]),
        (lambda d: d.update(threshold=d["scores"][3]), ["stored threshold", "recomputed"]),
        (lambda d: d.update(threshold="+inf"), ["stored threshold inf", "recomputed"]),
        (lambda d: d["scores"].__setitem__(0, "NaN"), ["scores.0"]),
        (lambda d: d["scores"].__setitem__(0, "-inf"), ["scores.0"]),
        (lambda d: d.update(confidence_level=0.5), ["confidence_level"]),
        (lambda d: d.update(delta=0.1), ["'split' with a PAC delta"]),
        (lambda d: d.update(question_ids=["a", "b"]), ["2 question ids"]),
        (lambda d: d["fingerprint"].update(embedding_dim="384"), ["fingerprint.embedding_dim"]),
        (lambda d: d["fingerprint"].pop("store"), ["fingerprint.store", "Field required"]),
        (lambda d: d.update(surprise=1), ["surprise", "Extra inputs"]),
        (lambda d: d.update(created_at=None), ["created_at"]),
    ],
)
def test_rechecksummed_tampering_is_refused(tmp_path, edit, words):
    path = tamper(retrieval_cal().save(tmp_path / "cal.json"), edit)
    refused(path, *words)


def test_the_issue_example_names_every_field(tmp_path):
    def edit(d):
        d.update(alpha=1.5, method="bogus", score_family="x", pool_size=-4, n=3, threshold=99)
        d["scores"] = d["scores"][:5]

    msg = refused(tamper(retrieval_cal().save(tmp_path / "cal.json"), edit))
    for field in ("alpha", "method", "score_family", "pool_size"):
        assert f"{field}:" in msg


def test_pac_threshold_is_recomputed_with_its_delta(tmp_path):
    path = retrieval_cal("pac", 0.2, 0.1).save(tmp_path / "pac.json")
    refused(tamper(path, lambda d: d.update(delta=0.4)), "recomputed")


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "conformal_rag_plugins.retrieval_calibration", "alpha": NaN}',
        '{"alpha": Infinity}',
        "[" * 100_000 + "]" * 100_000,
        '{"alpha": 0.1,',
        "\x80\x04\x95 pickle",
        "[1, 2, 3]",
        "null",
    ],
)
def test_malformed_json_is_an_integrity_error_naming_the_file(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode("latin-1"))
    refused(path)
    refused(path, loader=AnswerSetCalibration.load)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.update(retrieval_threshold=0.01), ["retrieval_threshold", "recomputed"]),
        (lambda d: d.update(generation_threshold=-0.99), ["generation_threshold", "recomputed"]),
        (lambda d: d.update(generation_threshold="+inf"), ["generation_threshold"]),
        (lambda d: d["generation_scores"].__setitem__(-1, -1.0), ["coverage_ceiling"]),
        (lambda d: d.update(alpha_retrieval=0.3), ["alpha_retrieval + alpha_generation"]),
        (lambda d: d.update(method="majority"), ["method"]),
        (lambda d: d.update(n_samples=0), ["n_samples"]),
        (lambda d: d["clustering"].update(method="vibes"), ["clustering.method", "vibes"]),
        (lambda d: d["clustering"].update(score="loudness"), ["clustering.score"]),
        (lambda d: d["retrieval"].update(threshold=0.01), ["stored threshold 0.01", "recomputed"]),
        (lambda d: d["retrieval"].update(pool_size=0), ["pool_size"]),
        (lambda d: d.update(generation_scores=d["generation_scores"][1:], coverage_ceiling=None), ["same questions"]),
    ],
)
def test_answer_set_tampering_is_refused(tmp_path, edit, words):
    path = tamper(answer_cal().save(tmp_path / "as.json"), edit)
    refused(path, *words, loader=AnswerSetCalibration.load)


def test_pool_size_zero_never_becomes_the_default():
    from conformal_rag_plugins.langchain.host import resolve_pool_size
    from conformal_rag_plugins.llamaindex.host import resolve_host

    class Index:  # an index would be asked for as_retriever(similarity_top_k=...)
        def as_retriever(self, similarity_top_k):
            raise AssertionError("pool_size 0 reached the host")

    for bad in (0, -3, True, 2.5):
        with pytest.raises(ConformalError, match="pool_size must be a whole number >= 1"):
            resolve_host(Index(), bad)
        with pytest.raises(ConformalError, match="pool_size must be a whole number >= 1"):
            resolve_pool_size(object(), bad)
    with pytest.raises(ConformalError, match="pool_size"):
        RetrievalCalibration(0.5, 0.2, "split", "relative", 0, len(SCORES), 1, SCORES, FP)


class TestSigning:
    def test_signed_round_trip_and_wrong_key(self, tmp_path):
        cal = retrieval_cal()
        path = cal.save(tmp_path / "s.json", signing_key="k1")
        assert len(json.loads(path.read_text())["signature"]) == 64
        assert RetrievalCalibration.load(path, signing_key="k1") == cal
        assert RetrievalCalibration.load(path) == cal  # no key: the checksum and fields are still checked
        with pytest.raises(CalibrationIntegrityError, match="signature does not match"):
            RetrievalCalibration.load(path, signing_key="k2")

    def test_environment_key_refuses_unsigned_and_resigned_files(self, tmp_path, monkeypatch):
        unsigned = retrieval_cal().save(tmp_path / "u.json")
        monkeypatch.setenv(SIGNING_KEY_ENV, "deploy-secret")
        refused(unsigned, "not signed")
        signed = retrieval_cal().save(tmp_path / "s.json")  # signed from the environment
        assert RetrievalCalibration.load(signed).threshold_ == retrieval_cal().threshold_
        # a consistent edit (alpha and its threshold changed together, checksum recomputed) still fails
        other = retrieval_cal(alpha=0.3)

        def edit(d):
            d.update(alpha=0.3, confidence_level=0.7, threshold=other.threshold_)

        refused(tamper(signed, edit), "signature does not match")
        monkeypatch.delenv(SIGNING_KEY_ENV)
        assert RetrievalCalibration.load(signed).alpha_ == 0.3  # without the key only the checks remain

    def test_answer_sets_are_signed_as_a_whole(self, tmp_path, monkeypatch):
        cal = answer_cal("hmp")
        path = cal.save(tmp_path / "a.json", signing_key=b"bytes-key")
        assert AnswerSetCalibration.load(path, signing_key=b"bytes-key").hmp_weight_ == cal.hmp_weight_
        monkeypatch.setenv(SIGNING_KEY_ENV, "other")
        refused(path, "signature", loader=AnswerSetCalibration.load)
        tamper(path, lambda d: d.update(model="another"))
        monkeypatch.setenv(SIGNING_KEY_ENV, "bytes-key")
        refused(path, "signature does not match", loader=AnswerSetCalibration.load)


def test_pac_retrieval_stage_round_trips(tmp_path):
    stage = answer_cal("pac").retrieval_stage()
    assert stage.method_ == "pac" and stage.delta_ == 0.1
    assert RetrievalCalibration.load(stage.save(tmp_path / "stage.json")).threshold_ == stage.threshold_
    for method in ("bonferroni", "hmp"):
        stage = answer_cal(method).retrieval_stage()
        assert RetrievalCalibration.load(stage.save(tmp_path / f"{method}.json")).threshold_ == stage.threshold_


def test_an_empty_environment_key_is_refused_naming_the_variable(tmp_path, monkeypatch):
    """``CONFORMAL_RAG_SIGNING_KEY=""`` is a mistake, as ``signing_key=""`` is: never silently unsigned."""
    cal = retrieval_cal()
    path = cal.save(tmp_path / "s.json", signing_key="k1")
    monkeypatch.setenv(SIGNING_KEY_ENV, "")
    with pytest.raises(CalibrationIntegrityError, match=SIGNING_KEY_ENV):
        retrieval_cal().save(tmp_path / "unsigned.json")
    assert not (tmp_path / "unsigned.json").exists()
    with pytest.raises(CalibrationIntegrityError, match=SIGNING_KEY_ENV):
        RetrievalCalibration.load(path)
    with pytest.raises(CalibrationIntegrityError, match=SIGNING_KEY_ENV):
        answer_cal().save(tmp_path / "a.json")
    assert RetrievalCalibration.load(path, signing_key="k1") == cal  # an explicit key still wins


@pytest.mark.parametrize("kind", ["retrieval", "answer sets"])
def test_a_utf8_byte_order_mark_is_accepted(tmp_path, kind):
    """Editors on Windows save JSON with a BOM; the file is otherwise intact, so it loads."""
    from conformal_rag_plugins.commands.report import load_any_calibration

    cal, loader = (retrieval_cal(), RetrievalCalibration.load) if kind == "retrieval" else (
        answer_cal(), AnswerSetCalibration.load)  # fmt: skip
    path = cal.save(tmp_path / "c.json")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert loader(path).to_dict() == cal.to_dict()
    assert load_any_calibration(path).to_dict() == cal.to_dict()
