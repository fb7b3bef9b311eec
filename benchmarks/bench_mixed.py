"""Loops that mix BLAS libraries: tileblas.blas against scipy.linalg.blas when other work comes between calls.

What: a user's loop calls a Level-3 routine and then does something else before the next call: nothing (a
tight loop), Python work, a wait (``time.sleep``), a NumPy matrix product (NumPy's own OpenBLAS), or a
SciPy LAPACK call (SciPy's OpenBLAS) (loops with longer work between calls: bench_gaps.py).  Each loop
runs with the routine taken from scipy.linalg.blas and with the same routine taken from tileblas.blas; the
partner work is the same in both.  NumPy, SciPy and tileblas each load their own OpenBLAS, whose idle
threads spin for 0.1 s after each call: with a partner that runs another OpenBLAS, two pools spin at once
and fight over the cores.  tileblas runs its parallel calls on its own pool (tileblas.kernels._pool), whose
workers sleep 200 µs after their work (unless ``TILEBLAS_POOL_WAIT`` asks for longer); this benchmark shows
what that gives, and what it costs where no other pool runs.

How: for each routine, order n and partner, three loops of ``--iters`` iterations (call + partner) are
timed interleaved, SciPy, tileblas, SciPy again (the control), each after a ``--settle`` pause, best of
``--rounds`` rounds; a sample is the loop's mean time per iteration.  ratio = SciPy / tileblas (> 1:
tileblas' loop is faster), control = SciPy / SciPy again.  For gemm a fourth loop takes the product from
NumPy (``np.dot``, NumPy's own OpenBLAS) in tileblas' place: what any second BLAS library in the loop
costs (numpy = SciPy / that loop).  Partners run in the order of ``--partners``
for all points of one before the next, so the loops that touch no other OpenBLAS come first.

Usage::

    python benchmarks/bench_mixed.py [--quick] [--routines dgemm,dtrsm,dsyrk] [--sizes 64,128,256,512,1024]
        [--partners none,python,sleep,numpy,lapack,scipyblas] [--rounds 3] [--json PATH] [--png PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

__all__ = ["PARTNERS", "loop", "measure", "main"]

#: what each partner does between two calls, on the call's n x n operands
PARTNERS = {
    "none": "nothing (a tight loop)",
    "python": "100 us of Python work",
    "sleep": "time.sleep(0.001)",
    "numpy": "NumPy a @ b (NumPy's OpenBLAS)",
    "lapack": "scipy.linalg.lu_factor(a) (SciPy's OpenBLAS)",
    "scipyblas": "scipy.linalg.blas.dgemm(1, a, b) (SciPy's OpenBLAS)",
}


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _partner(name: str, a: np.ndarray, b: np.ndarray) -> Callable[[], Any] | None:
    if name == "none":
        return None
    if name == "python":
        return lambda: _busy(100e-6)
    if name == "sleep":
        return lambda: time.sleep(0.001)
    if name == "numpy":
        return lambda: a @ b
    if name == "lapack":
        import scipy.linalg

        return lambda: scipy.linalg.lu_factor(a, check_finite=False)
    if name == "scipyblas":
        import scipy.linalg.blas as sb

        fn = getattr(sb, {np.dtype(np.float32): "sgemm", np.dtype(np.float64): "dgemm",
                          np.dtype(np.complex64): "cgemm", np.dtype(np.complex128): "zgemm"}[a.dtype])
        return lambda: fn(1.0, a, b)
    raise ValueError(f"partner must be one of {', '.join(PARTNERS)}; got {name!r}")


def _call(mod: Any, routine: str, a: np.ndarray, b: np.ndarray) -> Callable[[], Any]:
    fn = getattr(mod, routine)
    kind = routine[1:]
    if kind == "gemm":
        return lambda: fn(1.0, a, b)
    if kind in ("trsm", "trmm"):
        return lambda: fn(1.0, a, b)
    if kind == "syrk":
        return lambda: fn(1.0, a)
    if kind == "symm":
        return lambda: fn(1.0, a, b)
    raise ValueError(f"routine must be a gemm, trsm, trmm, syrk or symm; got {routine!r}")


def loop(call: Callable[[], Any], partner: Callable[[], Any] | None, iters: int) -> float:
    """Mean seconds per iteration of ``iters`` iterations of call (+ partner)."""
    t0 = time.perf_counter()
    if partner is None:
        for _ in range(iters):
            call()
    else:
        for _ in range(iters):
            call()
            partner()
    return (time.perf_counter() - t0) / iters


def measure(routine: str, n: int, partner: str, *, rounds: int, iters: int | None, settle: float) -> dict:
    """One point: SciPy's loop, tileblas' loop and SciPy's again, interleaved; best seconds per iteration."""
    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas._timing import interleaved

    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[routine[0]]
    rng = np.random.default_rng(n)
    a = np.asfortranarray((rng.standard_normal((n, n)) + n * np.eye(n)).astype(dtype))
    b = np.asfortranarray(rng.standard_normal((n, n)).astype(dtype))
    other = _partner(partner, a, b)
    if iters is None:  # about 30 ms of calls per loop, at least 20 iterations
        iters = max(20, min(2000, int(0.03 / max(2.0 * n ** 3 / 3e10, 1e-6))))
    calls = {"scipy": _call(sb, routine, a, b), "tileblas": _call(tb, routine, a, b)}
    if routine[1:] == "gemm":  # a second OpenBLAS in tileblas' place: NumPy's
        calls["numpy"] = lambda: np.dot(a, b)
    calls["control"] = _call(sb, routine, a, b)
    for c in calls.values():
        c()
    from tileblas.kernels import _openblas

    before = _openblas.pool_info()["stats"]
    t = interleaved({k: (lambda c=c: loop(c, other, iters)) for k, c in calls.items()}, rounds,
                    self_timed=True, settle=settle, alternate=True)
    best = t.best
    after = _openblas.pool_info()["stats"]
    return {"routine": routine, "n": n, "partner": partner, "iters": iters,
            "scipy_s": best["scipy"], "tileblas_s": best["tileblas"], "control_s": best["control"],
            "ratio": best["scipy"] / best["tileblas"], "control": best["scipy"] / best["control"],
            "numpy": best["scipy"] / best["numpy"] if "numpy" in best else None,
            "caller_parts": after.get("caller_parts", 0) - before.get("caller_parts", 0),
            "sleeps": after.get("sleeps", 0) - before.get("sleeps", 0)}


def _plot(points: list[dict], path: str, partners: list[str]) -> None:
    """Heat map: routine and order x partner, colour = SciPy's loop time over tileblas' on the grid
    benchmark's log scale (stated on the colour bar, an arrow where values go beyond it); each cell prints
    its ratio; a hatched corner marks a point whose control shows noise (as the grid's heat maps)."""
    import math
    import textwrap
    from types import SimpleNamespace

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Polygon

    from tileblas.cli._bench_grid import NOISY_CONTROL, _scale, _tick_labels, noisy

    rows = sorted({(p["routine"], p["n"]) for p in points}, key=lambda r: (r[0], r[1]))
    grid = np.full((len(rows), len(partners)), np.nan)
    norm, extend, ticks = _scale([p["ratio"] for p in points])
    strong = 0.6 * math.log(norm.vmax)
    fig, ax = plt.subplots(figsize=(1.5 * len(partners) + 3.4, 0.36 * len(rows) + 2.6), layout="constrained")
    n_noisy = 0
    for p in points:
        i, j = rows.index((p["routine"], p["n"])), partners.index(p["partner"])
        grid[i, j] = p["ratio"]
        ax.text(j, i, f"{p['ratio']:.2f}", ha="center", va="center", fontsize=8,
                color="white" if abs(math.log(p["ratio"])) > strong else "black")
        if noisy(SimpleNamespace(control=p["control"], ratio=p["ratio"])):
            n_noisy += 1
            ax.add_patch(Polygon([(j + 0.5, i - 0.5), (j + 0.1, i - 0.5), (j + 0.5, i - 0.15)], closed=True,
                                 facecolor="none", hatch="/////", edgecolor="0.15", linewidth=0.6))
    im = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
    ax.set_xticks(range(len(partners)), [k + "\n" + textwrap.fill(PARTNERS[k], 20) for k in partners], fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{r} n={n}" for r, n in rows], fontsize=8)
    ax.set_xlabel("partner: what runs between two calls of the loop", fontsize=8)
    ax.set_ylabel("routine, order n (square, Fortran-ordered operands)", fontsize=8)
    ax.set_title("Loops of a BLAS call and a partner: scipy.linalg.blas against tileblas.blas\n"
                 "blue: tileblas' loop faster; hatched corner: noisy, the control SciPy/SciPy off 1 by more "
                 f"than {NOISY_CONTROL - 1:.0%}\nor by more than the speed-up ({n_noisy} of {len(points)} points)",
                 fontsize=9)
    cb = fig.colorbar(im, ax=ax, extend=extend)
    cb.minorticks_off()
    labels = _tick_labels(ticks, extend)
    cb.set_ticks(ticks, labels=labels)
    cb.ax.tick_params(labelsize=8)
    ends = [e for e in labels if e[0] in "\u2264\u2265"]
    clip = f"; clipped: {' and '.join(ends)} (arrow{'s' if len(ends) > 1 else ''})" if ends else ""
    cb.set_label(f"speed-up = SciPy's loop time / tileblas' loop time (best of rounds)\nlog scale "
                 f"{norm.vmin:.2f}-{norm.vmax:.2f}, white 1.00{clip}", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--routines", default="dgemm,dtrsm,dsyrk")
    ap.add_argument("--sizes", default="64,128,256,512,1024")
    ap.add_argument("--partners", default=",".join(PARTNERS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=None, help="iterations per loop (default: about 30 ms of calls)")
    ap.add_argument("--settle", type=float, default=0.2)
    ap.add_argument("--quick", action="store_true", help="dgemm and dtrsm at 128 and 512, two rounds")
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.routines, args.sizes, args.rounds = "dgemm,dtrsm", "128,512", 2
    routines = [r.strip() for r in args.routines.split(",") if r.strip()]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    partners = [p.strip() for p in args.partners.split(",") if p.strip()]
    for p in partners:
        if p not in PARTNERS:
            ap.error(f"--partners: {p!r} is not one of {', '.join(PARTNERS)}")
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1; got {args.rounds}")
    for n in sizes:
        if n < 1:
            ap.error(f"--sizes: {n} is not a positive order")

    from tileblas._progress import Progress
    from tileblas.kernels import _openblas

    todo = [(p, r, n) for p in partners for r in routines for n in sizes]
    bar = Progress(len(todo), not args.no_progress, "mixed loops", "pt")
    points = []
    for partner, routine, n in todo:
        pt = measure(routine, n, partner, rounds=args.rounds, iters=args.iters, settle=args.settle)
        points.append(pt)
        label = f"{routine} {n} {partner} {pt['ratio']:.2f}x" + (f" (numpy {pt['numpy']:.2f}x)" if pt["numpy"] else "")
        bar.step(label)
        if args.no_progress:  # each point as it is done: a run cut short keeps what it measured
            print(f"point: {label}", flush=True)
    bar.close()

    print(f"\n{'partner':8s} {'routine':7s} {'n':>5s} {'iters':>5s} {'SciPy us/it':>12s} {'tileblas':>10s} "
          f"{'ratio':>7s} {'numpy':>6s} {'control':>8s} {'by caller':>9s} {'sleeps':>7s}")
    for p in points:
        npy = f"{p['numpy']:6.2f}" if p["numpy"] is not None else f"{'-':>6s}"
        print(f"{p['partner']:8s} {p['routine']:7s} {p['n']:5d} {p['iters']:5d} {p['scipy_s'] * 1e6:12.1f} "
              f"{p['tileblas_s'] * 1e6:10.1f} {p['ratio']:7.2f} {npy} {p['control']:8.2f} {p['caller_parts']:9d} "
              f"{p['sleeps']:7d}")
    print("\nratio = SciPy loop / tileblas loop (> 1: tileblas faster); numpy = SciPy loop / the loop with NumPy's "
          "np.dot in tileblas' place (gemm only: a second OpenBLAS); control = SciPy / SciPy again; "
          "by caller: parts of split calls the calling thread ran itself (workers late or busy); sleeps: how often "
          "a worker of tileblas' pool went to sleep")
    for partner in partners:
        rs = [p for p in points if p["partner"] == partner]
        worst = min(rs, key=lambda p: p["ratio"])
        ctl = [p["control"] for p in rs]
        print(f"  {partner:8s} ({PARTNERS[partner]}): median {statistics.median(p['ratio'] for p in rs):.2f}, "
              f"worst {worst['ratio']:.2f} ({worst['routine']} n={worst['n']}), "
              f"controls {min(ctl):.2f}-{max(ctl):.2f}")
        npy = [p for p in rs if p["numpy"] is not None]
        if npy:
            w = min(npy, key=lambda p: p["numpy"])
            print(f"  {'':8s} NumPy's np.dot in tileblas' place: median "
                  f"{statistics.median(p['numpy'] for p in npy):.2f}, worst {w['numpy']:.2f} ({w['routine']} n={w['n']})")
    pool = _openblas.pool_info()
    print(f"tileblas' pool: {'on' if pool['enabled'] else 'off: ' + pool['note']}; {pool['stats']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"points": points, "pool": pool, "partners": PARTNERS}, f, indent=1)
    if args.png:
        _plot(points, args.png, partners)
        print(f"heat map: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
