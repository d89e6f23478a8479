"""The example scripts run offline as a user would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.integration
@pytest.mark.parametrize("script", ["llamaindex_quickstart.py", "langchain_quickstart.py"])
def test_example_script_runs(script: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "token window" not in proc.stderr  # the examples split long passages before embedding them
    assert "split alpha=0.1 family=relative" in proc.stdout
    assert "gold:" in proc.stdout
    if script.startswith("llamaindex"):
        assert (tmp_path / "calibration.json").exists()
