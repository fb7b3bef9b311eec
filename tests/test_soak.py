"""A short run of benchmarks/soak.py (about 20 s): mixed checked calls from four threads.

Slow, so it runs only when asked: ``TILEBLAS_SOAK=1 pytest -m slow tests/test_soak.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TILEBLAS_SOAK"), reason="set TILEBLAS_SOAK=1 to run the soak")
def test_short_soak(tmp_path):
    out = tmp_path / "soak.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--seconds", "20",
                           "--watchdog", "30", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["wrong_total"] == 0, res["examples"]
    assert res["unexpected_errors"] == 0, res["examples"]
    assert res["hang"] is None, proc.stderr[-5000:]
    assert res["thread_growth"] <= 2, res["threads"]
    assert sum(res["calls"].values()) > 100
    assert proc.returncode == 0, proc.stdout[-3000:]
