"""Demo section: recursive TRMM/TRSM cast into GEMMs, and the Cholesky solve/inverse built on them."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

__all__ = ["section"]


def _best(fn: Callable[[], None], prep: Callable[[], object], trials: int = 3) -> float:
    best = float("inf")
    for _ in range(trials):
        x = prep()
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best


def section(out: Callable[[str], None]) -> None:
    from tileblas import _kernels, linalg
    from tileblas._recursive import DEFAULT_STOP, plan

    out("== Recursive TRMM/TRSM and Cholesky solve/inverse (tileblas.linalg) ==")
    n, nrhs = 1024, 256
    rng = np.random.default_rng(0)
    a = np.asfortranarray(np.tril(rng.standard_normal((n, n))) / np.sqrt(n) + 2 * np.eye(n))
    b0 = np.asfortranarray(rng.standard_normal((n, nrhs)))
    ops = plan("trmm", n, "L", "L", "T", DEFAULT_STOP)
    out(f"recursion for n={n}, stop={DEFAULT_STOP}: {sum(1 for o in ops if type(o).__name__ == 'Gemm')} GEMMs "
        f"+ {sum(1 for o in ops if type(o).__name__ == 'Leaf')} native leaves")
    lib2 = _kernels.get_library(2)
    for kind in ("trmm", "trsm"):
        rec = getattr(linalg, kind)
        nat = getattr(_kernels, kind)
        t_rec = _best(lambda b: rec(1.0, a, b, "L", "L", "T"), lambda: b0.copy(order="F"))
        t_nat = _best(lambda b: nat(1.0, a, b, "L", "L", "T", "N", lib=lib2), lambda: b0.copy(order="F"))
        b = b0.copy(order="F")
        rec(1.0, a, b, "L", "L", "T")
        t = np.tril(a).T
        err = np.abs(b - (t @ b0 if kind == "trmm" else np.linalg.solve(t, b0))).max()
        out(f"d{kind} L/L/T n={n} nrhs={nrhs}: recursive {n*n*nrhs/t_rec/1e9:5.1f} GFLOP/s, OpenBLAS "
            f"(2 threads) {n*n*nrhs/t_nat/1e9:5.1f} GFLOP/s, max error vs NumPy {err:.1e}")
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
