"""Call forms users write: tileblas.blas against scipy.linalg.blas per call, for each form.

What: the same routine called the ways people call it, beyond Fortran-ordered operands of the routine's
own dtype with int flags: bool flags (``lower=True``), NumPy integer flags, float32 or int operands to a
double routine, a vector right-hand side to trsm, C-ordered, strided, byte-swapped or unaligned operands,
a routine from ``get_blas_funcs``.  Each form is a small call (``--n 16``), where what the library does
around BLAS decides the time: a form that misses tileblas' C small-call path and takes its Python path
shows up here at once (tens of microseconds against SciPy's one).

How: for each form, three contenders are timed in the same process, interleaved, each a timeit block of
``--number`` calls, best of ``--repeat`` blocks, ``--sleep`` seconds before each block: SciPy, tileblas
and SciPy again (the control).  ratio = tileblas' time / SciPy's (below 1: tileblas is faster); control =
SciPy again / SciPy.  Before timing, each form's result is checked against SciPy's (same shape, dtype and
values within n * eps * magnitude).

Usage::

    python benchmarks/bench_forms.py [--n 16] [--number 5000] [--repeat 5] [--sleep 0.1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
from typing import Any, Callable

import numpy as np

__all__ = ["forms", "measure", "main"]


def forms(n: int) -> dict[str, Callable[[Any], Any]]:
    """Each form: a function of the blas module (tileblas.blas or scipy.linalg.blas) that makes one call.

    The operands are built once, here; forms that write an operand in place write one that the call
    leaves unchanged (a solve with the identity), so repeated calls time the same work.
    """
    import scipy.linalg as sl

    import tileblas.blas as tile_blas

    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)) + n * np.eye(n))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    eye = np.asfortranarray(np.eye(n))
    x = rng.standard_normal(n)
    a32, ai, ac = a.astype(np.float32), np.arange(n * n).reshape(n, n), np.ascontiguousarray(a)
    big = np.asfortranarray(rng.standard_normal((2 * n, 2 * n)))
    swapped = a.astype(a.dtype.newbyteorder(">"))
    raw = np.zeros(a.nbytes + 1, np.uint8)[1:]
    unaligned = raw.view(np.float64).reshape((n, n), order="F")
    unaligned[...] = a
    xin = x.copy()
    funcs = {id(tile_blas): tile_blas.get_blas_funcs("gemm", (a, b))}
    scipy_gemm = sl.get_blas_funcs("gemm", (a, b))

    return {
        "dgemm (reference form)": lambda m: m.dgemm(1.0, a, b),
        "dgemm trans_a=True": lambda m: m.dgemm(1.0, a, b, trans_a=True),
        "dgemm trans_a=np.int64(1)": lambda m: m.dgemm(1.0, a, b, trans_a=np.int64(1)),
        "dgemm float32 a": lambda m: m.dgemm(1.0, a32, b),
        "dgemm int a": lambda m: m.dgemm(1.0, ai, b),
        "dgemm C-ordered a": lambda m: m.dgemm(1.0, ac, b),
        "dgemm row block a[:n, :n]": lambda m: m.dgemm(1.0, big[:n, :n], b),
        "dgemm strided a[::2, ::2]": lambda m: m.dgemm(1.0, big[::2, ::2], b),
        "dgemm byte-swapped a": lambda m: m.dgemm(1.0, swapped, b),
        "dgemm unaligned a": lambda m: m.dgemm(1.0, unaligned, b),
        "dgemm vector b": lambda m: m.dgemm(1.0, a, x),
        "get_blas_funcs('gemm')": lambda m: funcs.get(id(m), scipy_gemm)(1.0, a, b),
        "dsyrk lower=True": lambda m: m.dsyrk(1.0, a, lower=True),
        "dtrsm lower=True": lambda m: m.dtrsm(1.0, a, b, lower=True),
        "dtrsm vector b": lambda m: m.dtrsm(1.0, a, x),
        "dtrsm vector b in place": lambda m: m.dtrsm(1.0, eye, xin, overwrite_b=True),
        "dgemv trans=True": lambda m: m.dgemv(1.0, a, x, trans=True),
        "dgemv float32 x": lambda m: m.dgemv(1.0, a, x.astype(np.float32)),
        "ddot float32": lambda m: m.ddot(a32[:, 0], a32[:, 1]),
        "daxpy a=np.float64": lambda m: m.daxpy(x, x.copy(), a=np.float64(2.0)),
    }


def _agree(got: Any, want: Any, n: int) -> str | None:
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        return f"shape/dtype {g.shape} {g.dtype} against SciPy's {w.shape} {w.dtype}"
    tol = 16 * n * np.finfo(w.dtype).eps * max(1.0, float(np.max(np.abs(w)))) * n
    err = float(np.max(np.abs(g - w))) if g.size else 0.0
    return None if err <= tol else f"max |diff| {err:.3g} > {tol:.3g}"


def measure(n: int = 16, number: int = 5000, repeat: int = 5, sleep: float = 0.1,
            progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One row per form: scipy_us, tileblas_us, ratio (tileblas / SciPy), control (SciPy again / SciPy);
    a form whose result differs from SciPy's gets an ``error`` and is not timed."""
    import scipy.linalg.blas as scipy_blas

    import tileblas.blas as tile_blas

    rows = []
    for name, f in forms(n).items():
        why = _agree(f(tile_blas), f(scipy_blas), n)
        if why is not None:
            rows.append({"form": name, "error": why})
            continue
        calls = {"scipy": lambda: f(scipy_blas), "tileblas": lambda: f(tile_blas), "control": lambda: f(scipy_blas)}
        best = {k: float("inf") for k in calls}
        order = list(calls)
        for rnd in range(repeat):
            for k in order[rnd % 3:] + order[: rnd % 3]:  # each round starts with the next contender
                time.sleep(sleep)
                best[k] = min(best[k], timeit.timeit(calls[k], number=number) / number)
        rows.append({"form": name, "scipy_us": best["scipy"] * 1e6, "tileblas_us": best["tileblas"] * 1e6,
                     "ratio": best["tileblas"] / best["scipy"], "control": best["control"] / best["scipy"]})
        if progress:
            progress(f"{name}: {rows[-1]['ratio']:.2f}x")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="matrix order and vector length (default 16)")
    ap.add_argument("--number", type=int, default=5000, help="calls per timeit block")
    ap.add_argument("--repeat", type=int, default=5, help="blocks per contender; the best is kept")
    ap.add_argument("--sleep", type=float, default=0.1, help="seconds before each block")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    if args.n < 2:
        ap.error(f"--n must be at least 2; got {args.n}")
    if args.number < 1 or args.repeat < 1:
        ap.error(f"--number and --repeat must be positive; got {args.number} and {args.repeat}")

    progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    rows = measure(args.n, args.number, args.repeat, args.sleep, progress)
    print(f"per-call time at n={args.n}, best of {args.repeat} blocks of {args.number} calls, interleaved "
          "SciPy / tileblas / SciPy again; ratio = tileblas' time / SciPy's")
    print(f"{'form':<28} {'scipy us':>9} {'tileblas us':>12} {'ratio':>6} {'control':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['form']:<28} ERROR {r['error']}")
        else:
            print(f"{r['form']:<28} {r['scipy_us']:>9.2f} {r['tileblas_us']:>12.2f} {r['ratio']:>6.2f} "
                  f"{r['control']:>8.2f}")
    ok = [r for r in rows if "error" not in r]
    if ok:
        worst = max(ok, key=lambda r: r["ratio"])
        print(f"{len(ok)} forms timed; worst {worst['ratio']:.2f}x ({worst['form']}), median "
              f"{statistics.median(r['ratio'] for r in ok):.2f}x, {sum(r['ratio'] > 1.5 for r in ok)} above 1.5x, "
              f"controls {min(r['control'] for r in ok):.2f}-{max(r['control'] for r in ok):.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"benchmark": "call forms", "n": args.n, "number": args.number, "repeat": args.repeat,
                       "rows": rows}, fh, indent=2)
    return 1 if len(ok) < len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
