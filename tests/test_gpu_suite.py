"""benchmarks/gpu_suite.sh, the one-command GPU check, on a machine without a GPU: it builds the C
extensions, fails soft at every step that needs CuPy (each failure recorded, the next step run), says why,
exits 0 within seconds, keeps to its 8-minute budget and writes at most 8 files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="the suite is a bash script")
def test_gpu_suite_runs_through_and_says_why_without_a_gpu(tmp_path):
    from tileblas.devices.gpu import gpu_count

    if gpu_count():
        pytest.skip("a GPU is here: the suite would measure it (run it as the device check)")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out), TILEBLAS_BUILD_IN=str(tmp_path / "build"),
               GPU_SUITE_N="256")
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_suite.sh")], env=env, capture_output=True, text=True,
                       timeout=240, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and {"summary.txt", "build.txt", "env.txt", "pytest.txt", "bench.txt"} <= set(files)
    summary = (out / "summary.txt").read_text()
    rows = {m.group(1): m for m in re.finditer(r"^(\w+) +(\d+) +(\d+) +(\S+) +(.*)$", summary, re.M)}
    assert set(rows) == {"build", "wheels", "env", "pytest", "tune", "bench"}, summary
    assert sum(int(m.group(2)) for m in rows.values()) <= 480  # the step limits fit the 8 minutes
    assert rows["build"].group(4) == "0", (out / "build.txt").read_text()  # every extension compiled
    assert re.search(r"(\d+) of \1 extensions built", (out / "build.txt").read_text())
    assert rows["pytest"].group(4) == "0"  # the GPU tests collected and skipped cleanly
    for step in ("env", "tune", "bench"):  # failed soft, saying why
        assert rows[step].group(4) not in ("0", "-") and "GPU" in rows[step].group(5)
        text = (out / f"{'bench' if step == 'tune' else step}.txt").read_text()  # tune writes to bench's log
        assert "pip install 'tileblas[gpu]'" in text or "no usable GPU" in text or "sees no GPU" in text
    assert not list(ROOT.glob("src/tileblas/**/*.so.tmp"))
