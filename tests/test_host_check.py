"""benchmarks/host_check.sh, the many-core host's drop-in check in one command: its dry flow on any
machine runs every step, writes the files it names (no more) and says what it measured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("bash") is None or not sys.platform.startswith("linux"),
                    reason="the check is a bash script for a Linux host")
def test_the_host_check_runs_each_step_and_writes_its_five_files(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "host_check.sh"), "--dry", str(out)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gaps.json", "log.txt", "manycore.json", "mixed.json",
                                                     "summary.txt"]
    summary = (out / "summary.txt").read_text()
    for step in ("gaps", "manycore", "mixed"):
        assert any(line.split()[:1] == [step] and line.split()[3] == "0" and line.rstrip().endswith("ok")
                   for line in summary.splitlines()), summary
    assert "host:" in summary and "pool settings" in summary
    assert "woke a call" in summary and "NumPy's np.dot in tileblas' place" in summary
    gaps = json.loads((out / "gaps.json").read_text())
    assert [p["routine"] for p in gaps["points"]] == ["dgemm"] and gaps["points"][0]["scipy_s"] > 0
    mixed = json.loads((out / "mixed.json").read_text())
    assert {p["partner"] for p in mixed["points"]} == {"none", "numpy"}
    assert all(p["numpy"] > 0 for p in mixed["points"])
    assert json.loads((out / "manycore.json").read_text())["points"]
