"""Demo section: recursive TRMM/TRSM cast into GEMMs, and the Cholesky solve/inverse built on them."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

__all__ = ["section"]


def _on_fresh_input(fn: Callable[[object], None], prep: Callable[[], object]) -> Callable[[], float]:
    """A call of ``fn`` on a fresh input from ``prep``, returning the seconds of the call alone."""
    def one() -> float:
        x = prep()
        t0 = time.perf_counter()
        fn(x)
        return time.perf_counter() - t0

    return one


def section(out: Callable[[str], None]) -> None:
    from tileblas import linalg
    from tileblas.kernels import _openblas
    from tileblas.kernels._recursive import default_stop, plan
    from tileblas._timing import interleaved

    out("== Recursive TRMM/TRSM and Cholesky solve/inverse (tileblas.linalg) ==")
    n, nrhs = 2048, 256
    rng = np.random.default_rng(0)
    a = np.asfortranarray(np.tril(rng.standard_normal((n, n))) / np.sqrt(n) + 2 * np.eye(n))
    b0 = np.asfortranarray(rng.standard_normal((n, nrhs)))
    for nr in (64, nrhs):
        stop = default_stop(nr)
        ops = plan("trmm", n, "L", "L", "T", stop)
        out(f"recursion for n={n}, {nr} right-hand sides: stop {stop}, "
            f"{sum(1 for o in ops if type(o).__name__ == 'Gemm')} GEMMs + "
            f"{sum(1 for o in ops if type(o).__name__ == 'Leaf')} native leaves")
    lib2 = _openblas.get_library(2)
    for nr in (64, nrhs):
        bb = b0[:, :nr].copy(order="F")
        for kind in ("trmm", "trsm"):
            rec = getattr(linalg, kind)
            nat = getattr(_openblas, kind)
            fresh = lambda: bb.copy(order="F")  # noqa: E731
            # NumPy's OpenBLAS (the reference checks) keeps its threads spinning for ~0.1 s after a call:
            # let them sleep before timing, or they share the two cores with what is timed
            time.sleep(0.25)
            best = interleaved({
                "rec": _on_fresh_input(lambda b: rec(1.0, a, b, "L", "L", "T"), fresh),
                "nat": _on_fresh_input(lambda b: nat(1.0, a, b, "L", "L", "T", "N", lib=lib2), fresh)},
                20, self_timed=True, prime=2, alternate=True).best
            b = bb.copy(order="F")
            rec(1.0, a, b, "L", "L", "T")
            t = np.tril(a).T
            err = np.abs(b - (t @ bb if kind == "trmm" else np.linalg.solve(t, bb))).max()
            gf = {k: n * n * nr / v / 1e9 for k, v in best.items()}
            out(f"d{kind} L/L/T n={n} nrhs={nr:3d}: recursive {gf['rec']:5.1f} GFLOP/s, OpenBLAS (2 threads) "
                f"{gf['nat']:5.1f} GFLOP/s = x{best['nat'] / best['rec']:.2f}, max error vs NumPy {err:.1e}")
    out("  (best of 20 interleaved calls; `python benchmarks/bench_trmm_trsm.py` measures n = 1024-4096 and the noise)")
    g = rng.standard_normal((n, n))
    spd = g @ g.T / n + np.eye(n)
    c = linalg.cho_factor(spd)
    x = linalg.potrs(c, b0)
    inv = linalg.inv_spd(spd)
    out(f"potrs residual |A x - b| = {np.abs(spd @ x - b0).max():.1e};  inv_spd |A inv - I| = "
        f"{np.abs(spd @ inv - np.eye(n)).max():.1e}")
    bad = spd.copy()
    bad[10, 10] = -1.0
    try:
        linalg.cho_factor(bad)
    except linalg.NotPositiveDefiniteError as exc:
        out(f"non-SPD input -> {type(exc).__name__}: {exc} (minor={exc.minor}); input untouched: "
            f"{bad[10, 10] == -1.0}")
