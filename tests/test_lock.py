"""The lock (constraints.txt) pins everything, holds the checked versions, and the drift check names what moved."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _check_lock() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_lock", ROOT / ".ci" / "check_lock.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_line_of_the_lock_is_one_exact_pin() -> None:
    lines = [ln for ln in (ROOT / "constraints.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    assert len(lines) > 100
    assert all(re.fullmatch(r"[a-z0-9-]+==[A-Za-z0-9.+!-]+", ln) for ln in lines), lines
    names = [ln.split("==")[0] for ln in lines]
    assert names == sorted(set(names))


def test_the_lock_holds_the_checked_native_builds_and_the_tools() -> None:
    pins = _check_lock().read_lock(ROOT / "constraints.txt")
    assert pins["llama-cpp-python"] == "0.3.16"
    assert pins["torch"] == "2.13.0+cpu"  # the CPU build on disk, never the CUDA one
    assert not [name for name in pins if name.startswith("nvidia-")]
    for tool in ("pip", "setuptools", "scikit-build-core", "pytest", "ruff", "chromadb", "sentence-transformers"):
        assert tool in pins, tool


def test_held_pins_in_constraints_in_are_the_locked_versions() -> None:
    pins = _check_lock().read_lock(ROOT / "constraints.txt")
    held = re.findall(r"^([a-z0-9-]+)==(\S+)", (ROOT / "constraints.in").read_text(), flags=re.M)
    assert held
    for name, version in held:
        assert Version(pins[name]).public == Version(version).public, name


def test_pyproject_ranges_admit_the_lock_and_refuse_the_release_known_to_crash() -> None:
    pins = _check_lock().read_lock(ROOT / "constraints.txt")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    llama = [Requirement(r) for extra in ("local", "server") for r in extras[extra] if r.startswith("llama-cpp-python")]
    assert len(llama) == 2
    for req in llama:
        assert pins["llama-cpp-python"] in req.specifier
        assert "0.3.36" not in req.specifier


def test_drift_names_each_package_that_moved() -> None:
    drift = _check_lock().drift
    lock = {"numpy": "2.4.6", "torch": "2.13.0+cpu", "ruff": "0.17.6"}
    have = {"numpy": "2.4.5", "torch": "2.13.0+cpu", "py-spy": "0.4.1", "conformal-rag-plugins": "0.1.0"}
    assert drift(lock, have) == [
        "numpy: locked 2.4.6, installed 2.4.5",
        "ruff: locked 0.17.6, not installed",
        "py-spy: installed 0.4.1, not in the lock",
    ]
    assert drift(lock, dict(lock)) == []
