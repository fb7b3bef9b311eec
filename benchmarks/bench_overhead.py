"""Per-call overhead of tileblas.blas against scipy.linalg.blas on tiny operands.

Both libraries are timed in the same process, interleaved (tileblas, scipy, tileblas, scipy, ...), and the
best of ``--repeat`` timeit runs is kept for each, so machine noise hits both alike.  Tiny operands make
the Python/f2py wrapper cost dominate: this measures what a call costs, not how fast BLAS computes.

Usage::

    python benchmarks/bench_overhead.py [--n 16] [--repeat 5] [--number 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from typing import Any, Callable

import numpy as np

__all__ = ["cases", "measure", "main"]


def cases(n: int) -> dict[str, Callable[[Any], Callable[[], Any]]]:
    """For each routine, a factory that, given a blas module, returns a zero-argument call on fresh data."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    a = np.asfortranarray(rng.standard_normal((n, n)))

    def daxpy(m):
        f, yy = m.daxpy, y.copy()
        return lambda: f(x, yy)

    def ddot(m):
        f = m.ddot
        return lambda: f(x, y)

    def dnrm2(m):
        f = m.dnrm2
        return lambda: f(x)

    def dscal(m):
        f, xx = m.dscal, x.copy()
        return lambda: f(-1.0, xx)  # sign flips keep the data bounded

    def dgemv(m):
        f = m.dgemv
        return lambda: f(1.0, a, x)

    return {"daxpy": daxpy, "ddot": ddot, "dnrm2": dnrm2, "dscal": dscal, "dgemv": dgemv}


def measure(n: int = 16, repeat: int = 5, number: int = 20000) -> list[dict[str, Any]]:
    """Best-of-``repeat`` seconds per call for tileblas and scipy, interleaved; one row per routine."""
    import scipy.linalg.blas as scipy_blas

    import tileblas.blas as tile_blas

    rows = []
    for name, make in cases(n).items():
        calls = {"tileblas": make(tile_blas), "scipy": make(scipy_blas)}
        for fn in calls.values():  # warm up (first-call costs, caches)
            for _ in range(100):
                fn()
        best = {k: float("inf") for k in calls}
        for _ in range(repeat):
            for k, fn in calls.items():
                t = timeit.timeit(fn, number=number) / number
                best[k] = min(best[k], t)
        rows.append(
            {
                "routine": name,
                "n": n,
                "tileblas_us": best["tileblas"] * 1e6,
                "scipy_us": best["scipy"] * 1e6,
                "ratio": best["tileblas"] / best["scipy"],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="vector length (gemv: n x n matrix)")
    ap.add_argument("--repeat", type=int, default=5, help="timeit repeats; the best is kept")
    ap.add_argument("--number", type=int, default=20000, help="calls per timeit repeat")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    rows = measure(args.n, args.repeat, args.number)
    if args.json:
        print(json.dumps({"benchmark": "blas per-call overhead", "rows": rows}, indent=2))
        return 0
    print(f"per-call time, best of {args.repeat} x {args.number} calls, interleaved (n={args.n})")
    print(f"{'routine':<8} {'tileblas us':>12} {'scipy us':>10} {'ratio':>7}")
    for r in rows:
        print(f"{r['routine']:<8} {r['tileblas_us']:>12.3f} {r['scipy_us']:>10.3f} {r['ratio']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
