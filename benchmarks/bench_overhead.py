"""Per-call overhead of every tileblas.blas routine against scipy.linalg.blas on small operands.

What: the time one call costs, for each of the 150 routines that tileblas.blas and scipy.linalg.blas both
export (Level 1, 2 and 3 in s/d/c/z), at a small size (``--n 16``: vectors of length 16, 16x16 matrices,
band routines with k = kl = ku = 1, packed arrays of n(n+1)/2).  Small operands make the wrapper cost
dominate: this measures what a call costs, not how fast BLAS computes.

How: the arguments are built generically from the required parameters in the first line of SciPy's f2py
docstring (``z = daxpy(x,y,[n,a,offx,incx,offy,incy])``): arrays in the routine's dtype, scalars as
Python numbers (alpha = 1.0, scal by -1, rotg of 1 and 2, ...); triangular and
banded/packed operands are diagonally dominant, Hermitian/symmetric ones are Hermitian/symmetric.  Each
contender gets its own copy of the same inputs, built the same way.  Calls that update an argument in
place stay bounded (scal by -1, orthogonal rotations, rotm with the identity, swap, copy; axpy grows
linearly).  Each routine is first called once per library on fresh copies: results (and the arguments
after the call) must agree with SciPy within n * eps * magnitude, else the routine is an error row and is
not timed.  Three contenders are then timed in the same process, interleaved per repeat (tileblas,
scipy, control, tileblas, ...; each round starts with the next one), each repeat one timeit block of ``--number`` calls (a block of slow
calls stops after ``--max-block-s``; the table marks such rows with *), best of ``--repeat``;
``--sleep`` seconds pass between rounds of three blocks.  The control is SciPy timed a second time as
if it were another library: control / scipy shows the noise of the measurement.

Usage::

    python benchmarks/bench_overhead.py [--n 16] [--repeat 5] [--number 20000] [--sleep 0.05]
        [--max-block-s 0.2] [--level 1|2|3] [--routines dgemm,daxpy] [--flags bool|int|numpy] [--json PATH]
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

__all__ = ["cases", "measure", "main"]

_SKIP = {"get_blas_funcs", "find_best_blas_type"}

_LEVEL1 = {"asum", "axpy", "copy", "dot", "dotc", "dotu", "nrm2", "rot", "rotg", "rotm", "rotmg",
           "scal", "swap", "amax"}
_LEVEL2 = {"gbmv", "gemv", "ger", "gerc", "geru", "hbmv", "hemv", "her", "her2", "hpmv", "hpr", "hpr2",
           "sbmv", "spmv", "spr", "spr2", "symv", "syr", "syr2", "tbmv", "tbsv", "tpmv", "tpsv", "trmv",
           "trsv"}
_LEVEL3 = {"gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"}
_DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
# Routines whose two-letter prefix names the (input) dtype: dzasum, scnrm2, csscal, zdrot, ...
_MIXED = {"sc": np.complex64, "cs": np.complex64, "dz": np.complex128, "zd": np.complex128}


def _family(name: str) -> tuple[str, Any]:
    """(family, dtype) of a routine name: ('axpy', float64) for daxpy, ('amax', complex64) for icamax."""
    if name.startswith("i") and name.endswith("amax"):
        return "amax", _DTYPES[name[1]]
    if name[:2] in _MIXED and name[2:] in ("asum", "nrm2", "scal", "rot"):
        return name[2:], _MIXED[name[:2]]
    return name[1:], _DTYPES[name[0]]


def level(name: str) -> int:
    fam = _family(name)[0]
    return 1 if fam in _LEVEL1 else 2 if fam in _LEVEL2 else 3 if fam in _LEVEL3 else 0


def routines() -> list[str]:
    """Public routines that both scipy.linalg.blas and tileblas.blas export (150 with SciPy 1.17)."""
    import scipy.linalg.blas as scipy_blas

    import tileblas.blas as tile_blas

    names = []
    for name in dir(scipy_blas):
        if name.startswith("_") or name in _SKIP or not hasattr(tile_blas, name):
            continue
        f = getattr(scipy_blas, name)
        if callable(f) and " = " in (f.__doc__ or "").split("\n", 1)[0]:
            names.append(name)
    return sorted(names)


def _signature(doc: str) -> tuple[list[str], list[str]]:
    """(required, optional) parameter names from an f2py docstring's first line:
    (['x', 'y'], ['n', 'a', 'offx', ...]) for daxpy."""
    head = doc.strip().split("\n", 1)[0]
    inside = head[head.index("(") + 1 : head.rindex(")")]
    required, _, optional = inside.partition("[")
    return ([p.strip() for p in required.split(",") if p.strip()],
            [p.strip() for p in optional.rstrip("]").split(",") if p.strip()])


def required_params(doc: str) -> list[str]:
    """Required parameter names from an f2py docstring's first line: ['x', 'y'] for daxpy."""
    return _signature(doc)[0]


def _args(name: str, params: list[str], n: int, seed: int) -> list[Any]:
    """The required arguments of ``name`` at size n, built deterministically from ``seed``."""
    fam, dt = _family(name)
    rng = np.random.default_rng(seed)
    real = np.zeros(0, dt).real.dtype.type
    cplx = np.iscomplexobj(np.zeros(0, dt))
    k = kl = ku = 1
    one = 1 + 0j if cplx else 1.0  # scalars are Python numbers, as alpha = 1.0 is

    def rand(*shape: int) -> np.ndarray:
        r = rng.standard_normal(shape)
        if cplx:
            r = r + 1j * rng.standard_normal(shape)
        return np.asfortranarray(r.astype(dt))

    herm = fam.startswith("h")  # hemv, hemm, her, herk, hbmv, hpmv, hpr, ...
    symm = fam.startswith("s") and fam not in ("scal", "swap")  # symv, symm, sbmv, spmv, spr, ...
    tri = fam.startswith("t")  # trmv, trsv, trmm, trsm, tbmv, tbsv, tpmv, tpsv

    def matrix() -> np.ndarray:
        a = rand(n, n)
        if herm:
            a = np.asfortranarray((a + a.conj().T) / 2)
        elif symm:
            a = np.asfortranarray((a + a.T) / 2)
        if tri or herm or symm:
            a[np.diag_indices(n)] += n  # well conditioned (diagonally dominant)
        if herm:
            a[np.diag_indices(n)] = a[np.diag_indices(n)].real
        return a

    def band() -> np.ndarray:
        if fam == "gbmv":
            a = rand(kl + ku + 1, n)
            a[ku, :] += n
        else:  # sbmv, hbmv, tbmv, tbsv: upper storage (the default), the diagonal is row k
            a = rand(k + 1, n)
            a[k, :] += n
            if herm:
                a[k, :] = a[k, :].real
        return a

    def packed() -> np.ndarray:
        ap = rand(n * (n + 1) // 2)
        j = np.arange(n)
        diag = j * (j + 3) // 2  # upper packed storage (the default): a[j, j] sits at j(j+1)/2 + j
        ap[diag] += n
        if herm:
            ap[diag] = ap[diag].real
        return ap

    out: list[Any] = []
    for p in params:
        if p in ("x", "y"):
            out.append(rand(n))
        elif p == "a":
            if fam == "rotg":
                out.append(one)
            elif fam == "scal":
                out.append(-1.0 if name[:2] in _MIXED else -one)  # sign flips: bounded
            elif fam in ("gbmv", "sbmv", "hbmv", "tbmv", "tbsv"):
                out.append(band())
            else:
                out.append(matrix())
        elif p == "b":
            out.append(2 * one if fam == "rotg" else rand(n, n))
        elif p == "ap":
            out.append(packed())
        elif p == "alpha":
            out.append(1.0)
        elif p in ("n", "m"):
            out.append(n)
        elif p in ("k", "kl", "ku"):
            out.append(1)
        elif p == "c":
            out.append(0.6)
        elif p == "s":
            out.append(0.8)
        elif p == "param":
            out.append(np.array([-1.0, 1, 0, 0, 1], dtype=real))  # the identity: bounded
        elif p in ("d1", "d2", "x1", "y1"):
            out.append({"d1": 1.0, "d2": 2.0, "x1": 3.0, "y1": 4.0}[p])
        else:
            raise ValueError(f"{name}: no rule for parameter {p!r}")
    return out


#: the flags ``--flags`` passes by keyword as 1 where a routine has them (not ``trans`` to herk/her2k,
#: which take 0 or 2 only)
FLAGS = ("lower", "trans_a", "trans")
#: what ``--flags`` passes them as (1 as a user writes it)
FLAG_VALUES = {"bool": True, "int": 1, "numpy": np.int64(1)}


def cases(
    n: int, names: list[str] | None = None, flags: str | None = None
) -> dict[str, Callable[[Any], tuple[Callable[[], Any], list[Any]]]]:
    """For each routine, a factory that, given a blas module, returns (zero-argument call, its arguments).

    Every call of a factory builds the same arguments afresh (same seed), so each contender gets its own
    identical copy and no contender's in-place updates reach another's.  ``flags`` ('bool', 'int' or
    'numpy'): also pass the routine's ``lower``, ``trans_a`` and ``trans``, where it has them, by keyword as
    ``True``, ``1`` or ``np.int64(1)`` (``lower=True`` is how many users write it).
    """
    import scipy.linalg.blas as scipy_blas

    out = {}
    for i, name in enumerate(names if names is not None else routines()):
        params, optional = _signature(getattr(scipy_blas, name).__doc__)
        herk = _family(name)[0] in ("herk", "her2k")
        kw = {} if flags is None else {f: FLAG_VALUES[flags] for f in FLAGS
                                       if f in optional and not (herk and f == "trans")}

        def make(
            m: Any, name: str = name, params: list[str] = params, seed: int = i, kw: dict[str, Any] = kw
        ) -> tuple[Callable[[], Any], list[Any]]:
            f, args = getattr(m, name), _args(name, params, n, seed)
            return _caller(f, args, kw), args

        out[name] = make
    return out


def _caller(f: Callable[..., Any], args: list[Any], kw: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A zero-argument call of ``f`` with ``args`` written out positionally (and ``kw`` by keyword), as
    users call BLAS.

    Not ``f(*args)``: unpacking costs a Python function (tileblas' wrappers) about 50 ns more than a
    written-out call, and spares a C callable taking a tuple (f2py's wrappers) the tuple it builds for a
    written-out call, so it would tilt a comparison of ~200 ns calls by a quarter.
    """
    if kw:  # f(_0, _1, lower=_lower), made once from source so that it stays written out
        names = [f"_{i}" for i in range(len(args))] + [f"{k}=_{k}" for k in kw]
        env = {"f": f, **{f"_{i}": a for i, a in enumerate(args)}, **{f"_{k}": v for k, v in kw.items()}}
        return eval(f"lambda: f({', '.join(names)})", env)  # noqa: S307 - our own fixed source
    k = len(args)
    if k == 0:
        return lambda: f()
    if k == 1:
        (a,) = args
        return lambda: f(a)
    if k == 2:
        a, b = args
        return lambda: f(a, b)
    if k == 3:
        a, b, c = args
        return lambda: f(a, b, c)
    if k == 4:
        a, b, c, d = args
        return lambda: f(a, b, c, d)
    if k == 5:
        a, b, c, d, e = args
        return lambda: f(a, b, c, d, e)
    if k == 6:
        a, b, c, d, e, g = args
        return lambda: f(a, b, c, d, e, g)
    if k == 7:
        a, b, c, d, e, g, h = args
        return lambda: f(a, b, c, d, e, g, h)
    return lambda: f(*args)


def _flat(v: Any) -> list[np.ndarray]:
    if isinstance(v, (tuple, list)):
        return [a for x in v for a in _flat(x)]
    return [np.asarray(v)]


def _agree(name: str, n: int, got: Any, want: Any) -> str | None:
    """None when ``got`` matches ``want`` within n * eps * magnitude, else a short reason."""
    eps = float(np.finfo(np.zeros(0, _family(name)[1]).real.dtype).eps)
    g, w = _flat(got), _flat(want)
    if len(g) != len(w):
        return f"{len(g)} outputs, scipy gives {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape:
            return f"output {i}: shape {a.shape}, scipy {b.shape}"
        if b.size == 0:
            continue
        scale = max(1.0, float(np.max(np.abs(b))))
        tol = 4 * n * eps * scale
        if not np.allclose(a, b, rtol=4 * n * eps, atol=tol, equal_nan=True):
            err = float(np.max(np.abs(a.astype(b.dtype) - b)))
            return f"output {i}: max |diff| {err:.3g} > {tol:.3g}"
    return None


def check(name: str, make: Callable[[Any], tuple[Callable[[], Any], list[Any]]], n: int) -> str | None:
    """One call per library on fresh identical inputs: None when tileblas agrees with SciPy (its result
    and the arguments after the call), else the reason."""
    import scipy.linalg.blas as scipy_blas

    import tileblas.blas as tile_blas

    (ft, at), (fs, as_) = make(tile_blas), make(scipy_blas)
    try:
        want = fs()
    except Exception as e:  # noqa: BLE001 - a case SciPy rejects is a bug of this benchmark
        return f"scipy raised {type(e).__name__}: {e}"
    try:
        got = ft()
    except Exception as e:  # noqa: BLE001
        return f"tileblas raised {type(e).__name__}: {e}"
    why = _agree(name, n, got, want)
    if why is None:
        why = _agree(name, n, at, as_)
        why = None if why is None else "arguments after the call: " + why
    return why


def measure(
    n: int = 16,
    repeat: int = 5,
    number: int = 20000,
    names: list[str] | None = None,
    sleep: float = 0.05,
    max_block_s: float = 0.2,
    progress: Callable[[str], None] | None = None,
    flags: str | None = None,
) -> list[dict[str, Any]]:
    """Best-of-``repeat`` time per call of tileblas, scipy and a control (scipy again), interleaved.

    One row per routine: tileblas_us, scipy_us, ratio (tileblas / scipy), control (control / scipy);
    a routine whose check fails gets an ``error`` row and is not timed.  ``number`` (calls per block)
    stops early, for a routine whose calls are so slow that a block would last over ``max_block_s``;
    the row's ``number`` is the fewest calls a block made.
    """
    import scipy.linalg.blas as scipy_blas

    import tileblas.blas as tile_blas

    modules = {"tileblas": tile_blas, "scipy": scipy_blas, "control": scipy_blas}
    rows: list[dict[str, Any]] = []
    for name, make in cases(n, names, flags).items():
        row: dict[str, Any] = {"routine": name, "level": level(name), "n": n}
        why = check(name, make, n)
        if why is not None:
            row["error"] = why
            rows.append(row)
            if progress:
                progress(f"{name}: ERROR {why}")
            continue
        calls = {k: timeit.Timer(make(m)[0]) for k, m in modules.items()}
        # Warm up (first-call costs, caches).  The slowest contender's warm-up decides whether a block
        # runs as one timeit of ``number`` calls or in chunks that stop after ``max_block_s``.
        per_call = max(t.timeit(20) / 20 for t in calls.values())
        chunk = number if per_call * number < max_block_s / 4 else max(1, int(0.01 / per_call))
        best = {k: float("inf") for k in calls}
        fewest = number
        order = list(calls)
        for rnd in range(repeat):
            # Each round starts with the next contender: the block right after the sleep may run on a
            # cold core, and no contender should always be the one that pays for it.
            for k in order[rnd % 3 :] + order[: rnd % 3]:
                t = calls[k]
                done, spent = 0, 0.0
                while done < number and spent < max_block_s:
                    step = min(chunk, number - done)
                    spent += t.timeit(step)
                    done += step
                best[k] = min(best[k], spent / done)
                fewest = min(fewest, done)
            if sleep > 0:
                time.sleep(sleep)
        row.update(
            number=fewest,
            tileblas_us=best["tileblas"] * 1e6,
            scipy_us=best["scipy"] * 1e6,
            ratio=best["tileblas"] / best["scipy"],
            control=best["control"] / best["scipy"],
        )
        rows.append(row)
        if progress:
            progress(f"{name}: {row['ratio']:.2f}x")
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r]
    out: dict[str, Any] = {"routines": len(rows), "timed": len(ok), "errors": len(rows) - len(ok)}
    if ok:
        worst = max(ok, key=lambda r: r["ratio"])
        out.update(
            worst_ratio=worst["ratio"],
            worst_routine=worst["routine"],
            median_ratio=statistics.median(r["ratio"] for r in ok),
            above_1_5x=sum(r["ratio"] > 1.5 for r in ok),
            max_control_dev=max(abs(r["control"] - 1) for r in ok),
        )
    return out


def summary_line(s: dict[str, Any]) -> str:
    if not s["timed"]:
        return f"{s['routines']} routines, {s['errors']} errors, none timed"
    return (
        f"{s['timed']} routines timed, {s['errors']} errors; worst ratio {s['worst_ratio']:.2f}x "
        f"({s['worst_routine']}), median {s['median_ratio']:.2f}x, {s['above_1_5x']} above 1.5x, "
        f"max |control - 1| {s['max_control_dev']:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="vector length / matrix order (default 16)")
    ap.add_argument("--repeat", type=int, default=5, help="timeit blocks per contender; the best is kept")
    ap.add_argument("--number", type=int, default=20000, help="calls per timeit block")
    ap.add_argument("--sleep", type=float, default=0.05, help="seconds between rounds of blocks")
    ap.add_argument("--max-block-s", type=float, default=0.2,
                    help="a block of slow calls stops after this many seconds")
    ap.add_argument("--level", type=int, choices=(1, 2, 3), help="only this BLAS level")
    ap.add_argument("--routines", help="comma-separated routine names (default: all shared routines)")
    ap.add_argument("--json", metavar="PATH", help="also write all rows and the summary as JSON")
    ap.add_argument("--flags", choices=sorted(FLAG_VALUES),
                    help="also pass lower, trans_a and trans (where a routine has them) as True, 1 or np.int64(1)")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)

    names = routines()
    if args.routines:
        wanted = [r.strip() for r in args.routines.split(",") if r.strip()]
        unknown = [r for r in wanted if r not in names]
        if unknown:
            ap.error(f"not a routine both libraries export: {', '.join(unknown)}")
        names = wanted
    if args.level:
        names = [r for r in names if level(r) == args.level]
    if not names:
        ap.error("no routine selected")

    progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    rows = measure(args.n, args.repeat, args.number, names, args.sleep, args.max_block_s, progress, args.flags)
    elapsed = time.perf_counter() - t0
    s = summary(rows)

    ok = sorted((r for r in rows if "error" not in r), key=lambda r: -r["ratio"])
    bad = [r for r in rows if "error" in r]
    print(
        f"per-call time at n={args.n}"
        + (f", lower/trans_a/trans passed as {FLAG_VALUES[args.flags]!r}" if args.flags else "")
        + f", best of {args.repeat} blocks of {args.number} calls, "
        f"interleaved tileblas/scipy/control; worst ratio first ({elapsed:.0f} s)"
    )
    print(f"{'routine':<8} {'lvl':>3} {'tileblas us':>12} {'scipy us':>10} {'ratio':>7} {'control':>8}")
    for r in ok:
        print(
            f"{r['routine']:<8} {r['level']:>3} {r['tileblas_us']:>12.3f} {r['scipy_us']:>10.3f} "
            f"{r['ratio']:>7.2f} {r['control']:>8.2f}" + (" *" if r["number"] < args.number else "")
        )
    for r in bad:
        print(f"{r['routine']:<8} {r['level']:>3} ERROR {r['error']}")
    print(summary_line(s))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "benchmark": "blas per-call overhead",
                    "n": args.n,
                    "repeat": args.repeat,
                    "number": args.number,
                    "flags": args.flags,
                    "sleep": args.sleep,
                    "seconds": elapsed,
                    "summary": s,
                    "rows": rows,
                },
                fh,
                indent=2,
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
