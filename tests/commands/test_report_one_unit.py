"""Issue 41 section 6, half-written outputs: ``conformal-rag report`` writes its folder as one unit.

Before the fix ``report`` drew and wrote the PNGs, then refused ``index.html`` (a FIFO) or
``report.json`` (a folder), leaving new figures beside the old page; a ``kill -9`` while writing left
new PNGs beside an old ``report.json``. Now every target is checked before any work, and the files
are written together (``runtime.atomic.write_unit``, tested on its own with a real ``kill -9`` in
``tests/runtime/test_atomic_unit.py``). The same probes on the real stack (a report drawn, then refused
or replacing an older one) are in ``test_report.py``, beside its calibration fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .test_report import _fails, _report, _unbuildable


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


TARGETS = {"index.html is a FIFO": ("index.html", _fifo), "report.json is a folder": ("report.json", _folder)}


@pytest.mark.parametrize(("name", "make"), list(TARGETS.values()), ids=list(TARGETS))
def test_an_unreplaceable_target_is_refused_before_any_work(tmp_path, capsys, name, make) -> None:
    """Refused before the calibration is even read (this one's host could not be rebuilt anyway)."""
    _unbuildable(tmp_path).save(tmp_path / "cal.json")
    out = tmp_path / "r"
    out.mkdir()
    make(out / name)
    _fails(_report(tmp_path / "cal.json", out), capsys, str(out / name))
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing written beside it
