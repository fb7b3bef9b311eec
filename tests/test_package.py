"""The installed package: a light import, the console command, and the Level-3 part of tileblas.blas."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

OPTIONAL = ("scipy", "dask", "distributed", "cupy", "matplotlib", "tqdm")


def _run(args, **kw):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, **kw)


def test_import_is_light():
    code = (
        "import sys, json, tileblas\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r})\n"
        "heavy = sorted(m for m in ('numpy', 'tileblas.kernels._openblas', 'tileblas.runtime') if m in sys.modules)\n"
        "print(json.dumps({'bad': bad, 'heavy': heavy, 'version': tileblas.__version__}))\n"
    )
    r = _run([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["bad"] == [], f"import tileblas imported optional modules: {out['bad']}"
    assert out["heavy"] == [], f"import tileblas loaded {out['heavy']} (they load on first use)"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", out["version"])


def test_blas_import_does_not_need_scipy_optional_stack():
    # tileblas.blas itself must not pull in plotting, progress bars or cluster code
    code = (
        "import sys, tileblas.blas\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('dask', 'distributed', 'cupy', 'matplotlib', 'tqdm')))\n"
    )
    r = _run([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def _console():
    exe = os.path.join(os.path.dirname(sys.executable), "tileblas")
    if not os.path.exists(exe):
        pytest.fail(f"console script not installed next to the interpreter: {exe}")
    return exe


def test_console_help():
    r = _run([_console(), "--help"])
    assert r.returncode == 0, r.stderr
    assert "usage: tileblas" in r.stdout
    for cmd in ("info", "demo"):
        assert cmd in r.stdout


def test_console_info():
    r = _run([_console(), "info"])
    assert r.returncode == 0, r.stderr
    assert "BLAS" in r.stdout and "OpenBLAS" in r.stdout
    r = _run([_console(), "info", "--json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["cpu_cores"] >= 1 and data["blas"]["threads_per_tile_worker"] == 1


def test_console_unknown_command_fails():
    r = _run([_console(), "no-such-command"])
    assert r.returncode != 0


def test_blas_exports_every_scipy_level3_routine():
    import scipy.linalg.blas as S

    import tileblas.blas as T

    doc = S.__doc__
    section = doc[doc.index("BLAS Level 3 functions"):]
    names = re.findall(r"^\s+([sdcz]\w+)$", section, re.M)
    assert len(names) == 30
    for name in names:
        assert name in T.__all__, name
        assert callable(getattr(T, name)), name
    for name in ("get_blas_funcs", "find_best_blas_type"):
        assert name in T.__all__ and callable(getattr(T, name))


def test_console_bench_blas_json():
    r = _run([_console(), "bench", "blas", "dgemm", "--n", "64", "--repeat", "2", "--threads", "1", "--json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["routine"] == "dgemm" and data["n"] == 64 and data["threads"] == 1
    assert data["max_rel_diff"] < 1e-12
    for lib in ("tileblas", "scipy"):
        assert data[lib]["best_s"] > 0 and data[lib]["gflops"] > 0
    assert data["speedup_vs_scipy"] == pytest.approx(data["scipy"]["best_s"] / data["tileblas"]["best_s"])
    assert all(v == 1 for v in data["scipy_openblas_threads"].values())


def test_console_bench_errors_name_the_routine():
    r = _run([_console(), "bench", "blas", "dfoo", "--n", "8"])
    assert r.returncode == 2 and "dfoo" in r.stderr
    r = _run([_console(), "bench", "blas", "drotg", "--n", "8"])
    assert r.returncode == 2 and "drotg" in r.stderr
    r = _run([_console(), "bench", "blas", "dgemm", "--n", "0"])
    assert r.returncode == 2 and "--n" in r.stderr


L3_BENCH = ["sgemm", "dgemm", "cgemm", "zgemm", "dsymm", "zhemm", "ssyrk", "cherk", "dsyr2k", "zher2k",
            "ctrmm", "dtrsm"]
L12_BENCH = ["daxpy", "ddot", "zdotc", "cdotu", "dnrm2", "dznrm2", "sasum", "izamax", "dscal", "zdscal",
             "dcopy", "dswap", "dgemv", "dger", "zgerc", "dsymv", "zhemv", "dtrmv", "strsv"]


@pytest.mark.parametrize("routine", L3_BENCH + L12_BENCH)
def test_bench_argument_builders(routine):
    import tileblas.blas as T
    from tileblas.cli._bench import bench_blas

    if routine not in T.__all__:  # Level 1/2 land separately: the benchmark must say so by name
        with pytest.raises(ValueError, match=routine):
            bench_blas(routine, n=16, repeat=1, threads=1)
        return
    r = bench_blas(routine, n=16, repeat=1, threads=1)
    assert r["routine"] == routine and r["n"] == 16
    tol = 1e-4 if routine[0] in "sc" or routine in ("scnrm2",) else 1e-10
    assert r["max_rel_diff"] <= tol, r
    assert ("gflops" if r["level"] == 3 else "gbytes_per_s") in r["tileblas"]
