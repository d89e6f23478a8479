"""Unit tests for saving/loading RetrievalCalibration (JSON, checksum, schema, fingerprint)."""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/runtime/atomic.py
#   conformal_rag_plugins/runtime/strict_json.py

from __future__ import annotations

import json
import math
import re
import tokenize
from dataclasses import replace
from pathlib import Path

import pytest

import conformal_rag_plugins
from conformal_rag_plugins.core.errors import CalibrationIntegrityError, ConformalError, FingerprintMismatchError
from conformal_rag_plugins.retrieval.calibration import SCHEMA_VERSION, RetrievalCalibration
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint

# Saving and loading, on tiny calibrations under the plain rank; the pool-miss rule is tested in
# test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

FP = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")


def make(threshold: float = 0.4375, **kw) -> RetrievalCalibration:
    base = {
        "threshold_": threshold,
        "alpha_": 0.4,  # rank ceil(6 * 0.6) = 4 of 5: the threshold is the 4th smallest score
        "method_": "split",
        "score_family_": "relative",
        "pool_size_": 50,
        "n_calibration_": 5,
        "n_misses_": 1,
        "scores_": (0.1, 0.2, 0.30000000000000004, 0.4375, math.inf),
        "fingerprint_": FP,
        "selection_": {"rule": "auto", "n_optimisation": 3, "seed": 0, "chosen": "relative"},
    }
    base.update(kw)
    return RetrievalCalibration(**base)


def rewrite(path: Path, edit) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_round_trip_is_equal(tmp_path):
    cal = make()
    path = cal.save(tmp_path / "cal.json")
    assert path == tmp_path / "cal.json"
    loaded = RetrievalCalibration.load(path)
    assert loaded == cal
    assert loaded.selection_ == cal.selection_  # not part of ==, checked separately
    assert loaded.scores_[-1] == math.inf
    assert loaded.scores_[2] == 0.30000000000000004  # floats survive bit for bit
    assert loaded.created_at_ == cal.created_at_
    assert loaded.confidence_level_ == pytest.approx(0.6)


def test_round_trip_inf_threshold_and_pac(tmp_path):
    cal = make(math.inf, method_="pac", delta_=0.05)
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "inf.json"))
    assert loaded == cal
    assert loaded.threshold_ == math.inf
    assert loaded.is_infinite_
    assert loaded.delta_ == 0.05
    assert "+inf" in loaded.summary()
    text = (tmp_path / "inf.json").read_text(encoding="utf-8")
    assert "Infinity" not in text and "NaN" not in text  # strict JSON, inf encoded as a string
    assert json.loads(text)["threshold"] == "+inf"


def test_file_contents_schema_and_checksum(tmp_path):
    path = make().save(tmp_path / "cal.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert data["corpus"] is None and data["gold_ranks"] is None  # unknown, but written
    assert data["kind"] == "conformal_rag_plugins.retrieval_calibration"
    assert re.fullmatch(r"[0-9a-f]{64}", data["checksum"])
    assert data["threshold"] == 0.4375
    assert data["n"] == 5
    assert data["n_misses"] == 1
    assert data["fingerprint"]["embedding_model"] == "all-MiniLM-L6-v2"
    assert data["epsilon"] is None  # split method


def test_edited_threshold_fails_the_checksum(tmp_path):
    path = make().save(tmp_path / "cal.json")
    rewrite(path, lambda d: d.update(threshold=0.9))
    with pytest.raises(CalibrationIntegrityError, match="checksum"):
        RetrievalCalibration.load(path)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["scores"].append(0.5),
        lambda d: d["fingerprint"].update(store="FAISS"),
        lambda d: d.update(alpha=0.2),
        lambda d: d.update(checksum="0" * 64),
        lambda d: d.pop("checksum"),
    ],
)
def test_any_edit_fails_the_checksum(tmp_path, edit):
    path = make().save(tmp_path / "cal.json")
    rewrite(path, edit)
    with pytest.raises(CalibrationIntegrityError):
        RetrievalCalibration.load(path)


def test_invalid_json_is_an_integrity_error(tmp_path):
    path = make().save(tmp_path / "cal.json")
    path.write_text(path.read_text(encoding="utf-8")[:-20], encoding="utf-8")  # truncated
    with pytest.raises(CalibrationIntegrityError, match="not valid JSON"):
        RetrievalCalibration.load(path)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x80\x04\x95\xff\xfe pickle-like bytes")
    with pytest.raises(CalibrationIntegrityError):
        RetrievalCalibration.load(binary)


@pytest.mark.parametrize("version", [0, 3, "1", "2", True, None])
def test_wrong_schema_version(tmp_path, version):
    path = make().save(tmp_path / "cal.json")
    rewrite(path, lambda d: d.update(schema_version=version))
    with pytest.raises(CalibrationIntegrityError, match="schema version"):
        RetrievalCalibration.load(path)


def test_not_a_calibration_file(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"kind": "something_else", "schema_version": 1}), encoding="utf-8")
    with pytest.raises(CalibrationIntegrityError):
        RetrievalCalibration.load(path)
    path.write_text("[1, 2, 3]", encoding="utf-8")
    with pytest.raises(CalibrationIntegrityError):
        RetrievalCalibration.load(path)


def test_integrity_errors_are_conformal_errors():
    assert issubclass(CalibrationIntegrityError, ConformalError)
    assert issubclass(FingerprintMismatchError, ConformalError)


def test_from_dict_round_trip_in_memory():
    cal = make()
    assert RetrievalCalibration.from_dict(cal.to_dict()) == cal
    assert RetrievalCalibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal


# --- fingerprints ------------------------------------------------------------------------------------


def test_load_with_matching_fingerprint(tmp_path):
    path = make().save(tmp_path / "cal.json")
    same = Fingerprint.from_dict(FP.to_dict())
    assert RetrievalCalibration.load(path, expected=same).fingerprint_ == FP


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("embedding_model", "bge-small-en"),
        ("score_scale", "exp(-distance)"),
        ("store", "FAISS"),
        ("embedding_dim", 768),
    ],
)
def test_load_with_other_fingerprint_names_the_field(tmp_path, field, value):
    path = make().save(tmp_path / "cal.json")
    other = replace(FP, **{field: value})
    with pytest.raises(FingerprintMismatchError) as info:
        RetrievalCalibration.load(path, expected=other)
    msg = str(info.value)
    assert field in msg
    assert repr(value) in msg
    assert repr(getattr(FP, field)) in msg
    # only the differing field is listed
    others = [f for f in FP.to_dict() if f != field and f != "retriever"]
    assert not any(f"{f}:" in msg for f in others)


def test_fingerprint_lists_every_differing_field():
    other = replace(FP, framework="llamaindex", distance="l2")
    with pytest.raises(FingerprintMismatchError) as info:
        FP.check_compatible(other)
    assert "framework" in str(info.value)
    assert "distance" in str(info.value)
    FP.check_compatible(FP)  # no error


def test_fingerprint_dict_round_trip_ignores_unknown_keys():
    data = FP.to_dict() | {"future_field": 1}
    assert Fingerprint.from_dict(data) == FP
    assert FP.to_dict()["retriever"] == "dense"


# --- no pickle, no eval ------------------------------------------------------------------------------


SERIALISERS = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}


def code_names(path: Path) -> list[tuple[int, str, str, str]]:
    """(line, previous token, name, next token) for every NAME token (comments and strings excluded)."""
    with path.open("rb") as fh:
        tokens = [t for t in tokenize.tokenize(fh.readline) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    return [
        (
            tok.start[0],
            tokens[i - 1].string if i else "",
            tok.string,
            tokens[i + 1].string if i + 1 < len(tokens) else "",
        )
        for i, tok in enumerate(tokens)
        if tok.type == tokenize.NAME
    ]


def offenders(path: Path) -> list[str]:
    """Uses of a code-executing serialiser or of eval/exec/__import__ in one source file."""
    found = []
    for line, prev, name, nxt in code_names(path):
        if name in SERIALISERS:  # import pickle, pickle.load(...), from joblib import ...
            found.append(f"{line}: {name}")
        if name in ("eval", "exec", "__import__") and nxt == "(" and prev not in (".", "def"):
            found.append(f"{line}: {name}(")  # builtin eval(...), not model.eval()
    return found


def test_package_never_pickles_or_evals():
    root = Path(conformal_rag_plugins.__file__).resolve().parent
    sources = sorted(root.rglob("*.py"))
    assert len(sources) > 20
    bad = {str(src.relative_to(root)): found for src in sources if (found := offenders(src))}
    assert bad == {}


def test_pickle_scanner_would_catch_offenders(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        'import pickle\nx = eval("1")\nmodel.eval()\n# pickle in a comment\ns = "eval(x) pickle"\n'
        "from joblib import dump\n"
    )
    assert offenders(bad) == ["1: pickle", "2: eval(", "6: joblib"]


def test_saved_file_is_plain_json_text(tmp_path):
    path = make().save(tmp_path / "cal.json")
    raw = path.read_bytes()
    assert raw.startswith(b"{")
    assert json.loads(raw.decode("utf-8"))["kind"].startswith("conformal_rag_plugins")
