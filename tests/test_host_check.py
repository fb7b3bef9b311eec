"""benchmarks/host_check.sh, the many-core host's drop-in check, the steps named in one command: its dry
flow on any machine runs every step, writes the files it names (no more) and says what it measured; an
unknown step or none is refused before anything runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


STEPS = ("gaps", "manycore", "pool", "nopool", "mixed", "mixedsleep", "grid", "tune", "first")
needs_bash = pytest.mark.skipif(shutil.which("bash") is None or not sys.platform.startswith("linux"),
                                reason="the check is a bash script for a Linux host")


def _check(args, out, timeout=300):
    # the user's files tileblas reads and tune writes, in the test's own directory
    env = dict(os.environ, PYTHON=sys.executable, TILEBLAS_MODEL_DB=str(out.parent / "models.sqlite"),
               TILEBLAS_PATHS=str(out.parent / "paths.json"))
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "host_check.sh"), *args, str(out)], env=env,
                          capture_output=True, text=True, timeout=timeout)


@needs_bash
def test_the_host_check_runs_each_step_and_writes_its_files(tmp_path):
    out = tmp_path / "out"
    r = _check(["--dry", ",".join(STEPS)], out)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gaps.json", "grid.json", "log.txt", "manycore.json",
                                                     "mixed.json", "mixedsleep.json", "nopool.json", "pool.json",
                                                     "summary.txt"]
    summary = (out / "summary.txt").read_text()
    for step in STEPS:
        assert any(line.split()[:1] == [step] and line.split()[3] == "0" and line.rstrip().endswith("ok")
                   for line in summary.splitlines()), summary
        assert f"-- {step}" in summary
    assert "host:" in summary and "pool settings" in summary
    assert "woke a call" in summary and "NumPy's np.dot in tileblas' place" in summary
    assert "n=64: first call, median over processes: tileblas / SciPy rate" in summary
    gaps = json.loads((out / "gaps.json").read_text())
    assert [p["routine"] for p in gaps["points"]] == ["dgemm"] and gaps["points"][0]["scipy_s"] > 0
    mixed = json.loads((out / "mixed.json").read_text())
    assert {p["partner"] for p in mixed["points"]} == {"none", "numpy"}
    assert all(p["numpy"] > 0 for p in mixed["points"])
    # the mixedsleep step: the same loops with TILEBLAS_THREAD_TIMEOUT=4, which reached tileblas where
    # OpenBLAS's threads run its calls (the note tileblas info shows; with the pool on it has nothing to set)
    sleep = json.loads((out / "mixedsleep.json").read_text())
    assert {p["partner"] for p in sleep["points"]} == {"none", "numpy"}
    assert sleep["pool"]["enabled"] or any("TILEBLAS_THREAD_TIMEOUT" in n for n in sleep["pool"]["notes"])
    assert not any("TILEBLAS_THREAD_TIMEOUT" in n for n in mixed["pool"]["notes"])
    # the pool step ran on the pool, the nopool step with OpenBLAS's own threads in tileblas' instances, the
    # manycore step as shipped for this machine (the pool only on the core counts it was measured at)
    from tileblas.kernels import _openblas
    from tileblas.kernels._threadpool import default_threads

    manycore, pool, nopool = (json.loads((out / f"{n}.json").read_text()) for n in ("manycore", "pool", "nopool"))
    assert manycore["points"] and pool["points"] and nopool["points"]
    assert pool["pool_enabled"] is True and nopool["pool_enabled"] is False
    assert manycore["pool_enabled"] is _openblas.machine_pool(default_threads())
    grid = json.loads((out / "grid.json").read_text())
    assert {p["mode"] for p in grid["points"]} == {"warm", "cold"}
    assert "measured (stored only where the gain is beyond the control's noise):" in summary
    assert not (tmp_path / "models.sqlite").exists() and not (tmp_path / "paths.json").exists()  # --dry-run


@needs_bash
@pytest.mark.parametrize("steps", ["", "gaps,bogus"])
def test_the_host_check_refuses_an_unknown_step_or_none(tmp_path, steps):
    out = tmp_path / "out"
    r = _check([steps] if steps else [], out, timeout=30)
    assert r.returncode == 2
    named = r.stderr.strip().rsplit("steps: ", 1)[1].split()
    assert sorted(named) == sorted(STEPS)
    assert not out.exists()
