"""The documentation site: it builds without a warning, and every example of the user guides runs.

The site is built with Sphinx (``make docs``; the ``docs`` extra installs it); the test skips when Sphinx
is not installed.  Each guide's examples run as doctests in a process of their own, on the shipped
settings (``TILEBLAS_PATHS`` and ``TILEBLAS_MODEL_DB`` point into an empty folder, so a ``tileblas tune``
run on this machine does not change what an example prints).  The GPU guide runs only where a GPU and
CuPy are present, the cluster guide only where ``distributed`` is installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GUIDES = sorted(p for p in (DOCS / "guide").glob("*.md") if p.name != "index.md")

# Runs one file's examples and prints {"attempted": n, "failed": k} as its last line.
_RUNNER = """
import doctest, json, sys
flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
r = doctest.testfile(sys.argv[1], module_relative=False, optionflags=flags, report=True)
print(json.dumps({"attempted": r.attempted, "failed": r.failed}))
"""


def _gpu_present() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def run_guide(path: Path, workdir: Path, timeout: float = 300) -> dict:
    """Run the examples of one guide in a fresh process; returns attempted/failed and the output."""
    env = dict(os.environ, TILEBLAS_PATHS=str(workdir / "paths.json"),
               TILEBLAS_MODEL_DB=str(workdir / "models.sqlite"), PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(path)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    try:
        counts = json.loads(lines[-1])
    except (IndexError, ValueError):
        counts = {"attempted": 0, "failed": -1}
    return {**counts, "returncode": proc.returncode, "output": proc.stdout + proc.stderr}


def test_guides_are_found():
    names = {p.stem for p in GUIDES}
    assert {"drop-in", "runtime", "out-of-core", "async", "linalg", "rblas", "perf", "cluster", "gpu"} <= names


@pytest.mark.parametrize("guide", GUIDES, ids=[p.stem for p in GUIDES])
def test_guide_examples_run(guide: Path, tmp_path: Path):
    if guide.stem == "gpu" and not _gpu_present():
        pytest.skip("the GPU guide's examples need an NVIDIA GPU and CuPy")
    if guide.stem == "cluster" and importlib.util.find_spec("distributed") is None:
        pytest.skip("the cluster guide's examples need dask.distributed (the 'distributed' extra)")
    r = run_guide(guide, tmp_path)
    assert r["returncode"] == 0 and r["failed"] == 0, r["output"][-6000:]
    assert r["attempted"] >= 3, f"{guide.name}: only {r['attempted']} examples ran"


def test_site_builds_without_warnings(tmp_path: Path):
    pytest.importorskip("sphinx")
    for ext in ("numpydoc", "myst_parser", "pydata_sphinx_theme"):
        pytest.importorskip(ext)
    # a copy of the sources: the build writes the reference pages into its source folder, and another
    # build (make docs) may be running on docs/ at the same time
    src = tmp_path / "docs"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("_build", "api"))
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(src), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    for guide in GUIDES:
        assert f"guide/{guide.stem}.html" in pages
    assert "reference/api/tileblas.blas.html" in pages
    assert "reference/api/generated/tileblas.runtime.Runtime.html" in pages
    assert any(p.startswith("measurements/") for p in pages)
