"""The first calls of a process: the import and the first dgemm calls, tileblas against SciPy.

Each run is a fresh interpreter that imports one library's ``blas`` module (``tileblas.blas`` or
``scipy.linalg.blas``; NumPy's import counted in both) and times ``dgemm(1.0, a, b)`` ``--calls`` times
at each order of ``--sizes``; the two libraries alternate, ``--processes`` interpreters each.  tileblas'
first Level-3 call makes its default runtime, so that call carries a one-time cost SciPy pays in its
import instead.  Python's bytecode is written and read as after an install (``PYTHONDONTWRITEBYTECODE``
is cleared for the children); the first interpreter of each library is an untimed warm-up.

    python benchmarks/bench_first_calls.py
    python benchmarks/bench_first_calls.py --sizes 512,2048 --processes 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
lib, sizes, calls = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
if lib == "scipy":
    import scipy.linalg.blas as m
else:
    import tileblas.blas as m
out = {"import_s": time.perf_counter() - t0, "gflops": {}}
rng = np.random.default_rng(0)
for n in sizes:
    a = np.asfortranarray(rng.random((n, n)))
    b = np.asfortranarray(rng.random((n, n)))
    rates = []
    for _ in range(calls):
        t = time.perf_counter()
        m.dgemm(1.0, a, b)
        rates.append(2.0 * n ** 3 / (time.perf_counter() - t) / 1e9)
    out["gflops"][str(n)] = rates
print(json.dumps(out))
"""

LIBS = ("scipy", "tileblas")


def _child(lib: str, sizes: str, calls: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run([sys.executable, "-c", CHILD, lib, sizes, str(calls)], capture_output=True, text=True,
                       env=env, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,2048", help="comma-separated dgemm orders (default 512,2048)")
    ap.add_argument("--calls", type=int, default=5, help="calls timed per order and process (default 5)")
    ap.add_argument("--processes", type=int, default=3, help="fresh interpreters per library (default 3)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes must be comma-separated orders; got {args.sizes!r}")
    if not sizes or min(sizes) < 1:
        ap.error(f"--sizes must be orders >= 1; got {args.sizes!r}")
    if args.calls < 2 or args.processes < 1:
        ap.error(f"--calls must be >= 2 and --processes >= 1; got {args.calls}, {args.processes}")
    for lib in LIBS:  # warm-up: bytecode written, files in the page cache
        _child(lib, str(min(sizes)), 2)
    runs: dict[str, list[dict]] = {lib: [] for lib in LIBS}
    for i in range(args.processes):
        for lib in (LIBS if i % 2 == 0 else LIBS[::-1]):
            runs[lib].append(_child(lib, args.sizes, args.calls))
    if args.json:
        print(json.dumps({"sizes": sizes, "calls": args.calls, "runs": runs}, indent=1))
        return 0
    print(f"fresh interpreters, {args.processes} per library, alternated; dgemm GFLOP/s per call")
    for lib in LIBS:
        imp = [r["import_s"] * 1e3 for r in runs[lib]]
        print(f"{lib:9s} import {min(imp):.0f}-{max(imp):.0f} ms")
        for n in sizes:
            first = [r["gflops"][str(n)][0] for r in runs[lib]]
            rest = [g for r in runs[lib] for g in r["gflops"][str(n)][1:]]
            print(f"          n={n:5d}: first call {min(first):6.1f}-{max(first):6.1f}, calls 2-{args.calls} "
                  f"{min(rest):6.1f}-{max(rest):6.1f} (median {statistics.median(rest):.1f})")
    for n in sizes:
        f = {lib: statistics.median(r["gflops"][str(n)][0] for r in runs[lib]) for lib in LIBS}
        print(f"n={n}: first call, median over processes: tileblas / SciPy rate {f['tileblas'] / f['scipy']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
