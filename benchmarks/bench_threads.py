"""Two Python threads calling DGEMM: does the call release the GIL?  And how long does ``import tileblas`` take?

The issue's bar: two Python threads, each calling the kernel layer's dgemm (``tileblas.kernels._openblas.gemm`` on
tileblas' own single-threaded OpenBLAS, n=1536), finish at least 1.7x faster than one thread doing both
calls one after the other (best of 5 interleaved trials).  ``scipy.linalg.blas.dgemm`` is measured the
same way in the same run, on single-threaded OpenBLAS too (the environment variables below are set before
NumPy/SciPy are imported, and the thread count is read back and reported).  ``tileblas.blas.dgemm``, the
drop-in routine, is measured as well: it runs on the tile runtime (when present), which already uses
every core for one call, so its "two threads" figure measures something else and is reported for
information only.

Each trial runs, for every implementation in rotating order, "serial" (one thread, two calls) and then
"threads" (two threads, one call each); the best of the trials is kept for each.

Import time: ``python -c "import tileblas"`` and ``python -c "import numpy"`` (and ``python -c pass`` for
the interpreter's own start-up), each run ``--import-runs`` times, interleaved; best and median reported.

    python benchmarks/bench_threads.py                 # n=1536, best of 5
    python benchmarks/bench_threads.py --json          # JSON on stdout
    python benchmarks/bench_threads.py --n 1024 --trials 3
"""

from __future__ import annotations

import os

# Single-threaded BLAS for NumPy and SciPy: must happen before they are imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import scipy.linalg.blas as sblas  # noqa: E402

import tileblas.blas as tblas  # noqa: E402
from tileblas.kernels import _openblas  # noqa: E402
from tileblas.cli._bench import scipy_openblas_threads  # noqa: E402

BAR = 1.7


def _serial(fn: Callable[[np.ndarray], Any], cs: list[np.ndarray]) -> float:
    t0 = time.perf_counter()
    for c in cs:
        fn(c)
    return time.perf_counter() - t0


def _threaded(fn: Callable[[np.ndarray], Any], cs: list[np.ndarray]) -> float:
    start = threading.Barrier(len(cs) + 1)

    def work(c: np.ndarray) -> None:
        start.wait()
        fn(c)

    ts = [threading.Thread(target=work, args=(c,)) for c in cs]
    for t in ts:
        t.start()
    t0 = time.perf_counter()
    start.wait()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def gil_benchmark(n: int = 1536, trials: int = 5) -> dict[str, Any]:
    """Serial vs two-thread time of two DGEMMs for the kernel layer, tileblas.blas and SciPy."""
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    lib1 = _openblas.get_library(1)

    def kernel(c: np.ndarray) -> None:
        _openblas.gemm(1.0, a, b, 0.0, c, "N", "N", lib1)

    def dropin(c: np.ndarray) -> None:
        tblas.dgemm(1.0, a, b, 0.0, c, overwrite_c=1)

    def scipy(c: np.ndarray) -> None:
        sblas.dgemm(1.0, a, b, 0.0, c, overwrite_c=1)

    impls = {
        "tileblas.kernels._openblas.gemm": kernel,
        "scipy.linalg.blas.dgemm": scipy,
        "tileblas.blas.dgemm": dropin,
    }
    outs = {k: [np.zeros((n, n), order="F"), np.zeros((n, n), order="F")] for k in impls}
    for k, fn in impls.items():  # warm up (thread pools, page faults, runtime start-up)
        fn(outs[k][0])
    serial = {k: [] for k in impls}
    threaded = {k: [] for k in impls}
    names = list(impls)
    for t in range(trials):
        for k in names[t % len(names):] + names[: t % len(names)]:
            serial[k].append(_serial(impls[k], outs[k]))
            threaded[k].append(_threaded(impls[k], outs[k]))
    ref = a @ b
    flops = 2 * 2.0 * n**3
    rows = {}
    for k in impls:
        s, th = min(serial[k]), min(threaded[k])
        err = max(float(np.max(np.abs(c - ref))) for c in outs[k]) / float(np.max(np.abs(ref)))
        rows[k] = {
            "serial_best_s": s,
            "threads_best_s": th,
            "speedup_best": s / th,
            "speedup_median_per_trial": statistics.median(x / y for x, y in zip(serial[k], threaded[k])),
            "gflops_serial": flops / s / 1e9,
            "gflops_threads": flops / th / 1e9,
            "max_rel_error": err,
            "serial_all_s": serial[k],
            "threads_all_s": threaded[k],
        }
    kernel_speedup = rows["tileblas.kernels._openblas.gemm"]["speedup_best"]
    return {
        "n": n,
        "trials": trials,
        "bar": BAR,
        "passed": kernel_speedup >= BAR,
        "tileblas_blas_threads": lib1.num_threads(),
        "scipy_openblas_threads": scipy_openblas_threads(),
        "cpu_count": os.cpu_count(),
        "results": rows,
    }


def import_benchmark(runs: int = 5) -> dict[str, Any]:
    """Wall time of fresh interpreters importing tileblas, numpy, or nothing; interleaved."""
    cmds = {
        "import tileblas": "import tileblas",
        "import numpy": "import numpy",
        "python -c pass": "pass",
    }
    env = dict(os.environ)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, code in cmds.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            times[k].append(time.perf_counter() - t0)
    check = subprocess.run(
        [sys.executable, "-c",
         "import sys, tileblas; print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('scipy','numpy','dask','distributed','cupy','matplotlib','tqdm'))))"],
        capture_output=True, text=True, check=True, env=env,
    )
    return {
        "runs": runs,
        "best_s": {k: min(v) for k, v in times.items()},
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "heavy_modules_imported_by_tileblas": [m for m in check.stdout.strip().split(",") if m],
    }


def _print(gil: dict[str, Any], imp: dict[str, Any]) -> None:
    print(f"Two DGEMMs of order {gil['n']}: one thread doing both vs two Python threads doing one each")
    print(f"(best of {gil['trials']} interleaved trials; BLAS threads: tileblas {gil['tileblas_blas_threads']}, "
          f"scipy {gil['scipy_openblas_threads']}; {gil['cpu_count']} CPUs)")
    print(f"{'implementation':<26}{'1 thread s':>12}{'2 threads s':>13}{'speedup':>9}{'median':>8}"
          f"{'GFLOP/s':>9}{'rel err':>10}")
    for k, r in gil["results"].items():
        print(f"{k:<26}{r['serial_best_s']:>12.3f}{r['threads_best_s']:>13.3f}{r['speedup_best']:>8.2f}x"
              f"{r['speedup_median_per_trial']:>7.2f}x{r['gflops_threads']:>9.1f}{r['max_rel_error']:>10.1e}")
    sp = gil["results"]["tileblas.kernels._openblas.gemm"]["speedup_best"]
    print(f"bar: kernel-layer speedup >= {gil['bar']}x -> {'PASS' if gil['passed'] else 'FAIL'} ({sp:.2f}x)")
    print("(tileblas.blas.dgemm runs on the tile runtime, which already spreads one call over all cores.)")
    print()
    print(f"Interpreter start-up + import, {imp['runs']} runs each, interleaved:")
    for k in imp["best_s"]:
        print(f"  {k:<18} best {imp['best_s'][k]*1e3:7.1f} ms   median {imp['median_s'][k]*1e3:7.1f} ms")
    heavy = imp["heavy_modules_imported_by_tileblas"]
    print(f"  modules among numpy/scipy/dask/cupy/matplotlib/tqdm imported by 'import tileblas': "
          f"{', '.join(heavy) if heavy else 'none'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1536, help="matrix order (default 1536)")
    p.add_argument("--trials", type=int, default=5, help="interleaved trials (default 5)")
    p.add_argument("--import-runs", type=int, default=5, help="interpreter launches per import case")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = p.parse_args(argv)
    if args.n < 1 or args.trials < 1 or args.import_runs < 1:
        p.error(f"--n, --trials and --import-runs must be positive; got {args.n}, {args.trials}, "
                f"{args.import_runs}")
    gil = gil_benchmark(args.n, args.trials)
    imp = import_benchmark(args.import_runs)
    if args.json:
        print(json.dumps({"gil": gil, "import": imp}, indent=2))
    else:
        _print(gil, imp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
